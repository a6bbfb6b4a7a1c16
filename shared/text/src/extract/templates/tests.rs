#![allow(clippy::unwrap_used)]
use super::*;

fn strip(content: &str) -> String {
    Markup::builtin().strip(content).text
}

#[test]
fn liquid_tags_go_and_link_tags_become_targets() {
    assert_eq!(
        strip("Refer to the [FMLA page]({% page \"travel-and-leave/fmla/\" %}).\n"),
        "Refer to the [FMLA page](travel-and-leave/fmla/).\n"
    );
    assert_eq!(
        strip("Inform {% slack_channel \"equipment\" %}.\n"),
        "Inform #equipment.\n"
    );
    assert_eq!(
        strip("Ask in {% slack_channel \"pifs\" \"PIFs\" %}.\n"),
        "Ask in PIFs.\n"
    );
    assert_eq!(
        strip("{% include \"step-indicator.html\" steps=3 %}\n\nStart here.\n"),
        "\n\nStart here.\n"
    );
    assert_eq!(
        strip("a {% comment %} TODO {% page \"x\" %} {% endcomment %}b {{ site.title }}c\n"),
        "a b c\n"
    );
    assert_eq!(
        strip("[see]({{site.baseurl}}/software/)\n"),
        "[see](/software/)\n"
    );
    assert_eq!(
        strip("\\[Details within\nGSA]({% page \"/gsa-details\" %}) and \\[x\\].\n"),
        "[Details within\nGSA](/gsa-details) and \\[x\\].\n"
    );
    assert_eq!(
        strip("{% image \"_img/zap.png\" \"ZAP home screen\" %}\n"),
        "ZAP home screen\n"
    );
}

#[test]
fn code_keeps_its_text_but_raw_markers_go() {
    let page = "Use `{% page %}` here.\n\n```liquid\n{% raw %}{% include \"low.html\" %}{% endraw %}\n```\n";
    assert_eq!(
        strip(page),
        "Use `{% page %}` here.\n\n```liquid\n{% include \"low.html\" %}\n```\n"
    );
    // The 18F Handbook's components page, as Jekyll shows it.
    assert_eq!(
        strip(
            "does **_not_** use the `{% raw %}{%include%}{% endraw %}` directive; use the\n`{{ \"{%include%}\" }}` directive and `{{ site.x }}`.\n"
        ),
        "does **_not_** use the `{%include%}` directive; use the\n`{%include%}` directive and `{{ site.x }}`.\n"
    );
}

#[test]
fn hugo_shortcodes_and_mdx() {
    assert_eq!(
        strip(
            "See [the guide]({{< relref \"getting-started/quick.md\" >}}).\n{{% notice tip %}}\nTip text.\n{{% /notice %}}\n"
        ),
        "See [the guide](getting-started/quick.md).\n\nTip text.\n\n"
    );
    assert_eq!(
        strip("import Tabs from '@theme/Tabs';\n\n{/* hidden */}Text.\n"),
        "\n\nText.\n"
    );
}

#[test]
fn offsets_map_back_to_the_content() {
    let content = "Inform {% slack_channel \"equipment\" %} today.";
    let rewrite = Markup::builtin().strip(content);
    let at = rewrite.text.find("today").unwrap();
    assert_eq!(&content[rewrite.source_of(at, false)..], "today.");
}

#[test]
fn operator_rules_run_first() {
    let markup = Markup::new(
        &[],
        &[MarkupRule {
            pattern: r"\[\[ticket:(\d+)\]\]".into(),
            replace: "ticket $1".into(),
            doc_prefix: "kb:".into(),
        }],
    )
    .unwrap();
    let rewrite = markup.apply_rules("kb:a", "See [[ticket:42]].").unwrap();
    assert_eq!(rewrite.text, "See ticket 42.");
    assert!(markup.apply_rules("other", "See [[ticket:42]].").is_none());
    assert!(
        Markup::new(
            &[],
            &[MarkupRule {
                pattern: "(".into(),
                replace: String::new(),
                doc_prefix: String::new()
            }]
        )
        .is_err()
    );
}
