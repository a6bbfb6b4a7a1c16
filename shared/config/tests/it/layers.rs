//! Defaults, file and environment layers; unknown keys and bad values fail with a message.

use casement_config::{Config, load};
use casement_text::TextConfig;
use serde::{Deserialize, Serialize};

#[derive(Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
struct Example {
    text: TextConfig,
    name: String,
}

impl Config for Example {
    fn validate(&self) -> Result<(), String> {
        self.text.validate()
    }
}

fn write(contents: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!(
        "casement-config-{}-{}.toml",
        std::process::id(),
        contents.len()
    ));
    std::fs::write(&path, contents).expect("write");
    path
}

#[test]
fn file_then_environment_override_defaults() {
    let file =
        write("name = \"from-file\"\n[text]\nwindow_radius = 1\nmax_sentence_tokens = 120\n");
    let env = [
        ("APP__TEXT__WINDOW_RADIUS".to_owned(), "2".to_owned()),
        ("OTHER__X".to_owned(), "1".to_owned()),
    ];
    let config: Example = load(Some(&file), "APP", env).expect("loads");
    assert_eq!(config.name, "from-file");
    assert_eq!(
        config.text.window_radius, 2,
        "environment wins over the file"
    );
    assert_eq!(config.text.max_sentence_tokens, 120);
    assert_eq!(config.text.language, "en", "defaults fill the rest");
}

#[test]
fn unknown_keys_bad_values_and_broken_files_fail_with_a_message() {
    let typo = write("[text]\nwindow_radious = 1\n");
    let error = load::<Example>(Some(&typo), "APP", [])
        .expect_err("unknown key")
        .to_string();
    assert!(error.contains("window_radious"), "{error}");

    let env = [("APP__TEXT__WINDOW_RADIUS".to_owned(), "99".to_owned())];
    let error = load::<Example>(None, "APP", env)
        .expect_err("out of range")
        .to_string();
    assert!(
        error.contains("window_radius = 99") && error.contains("APP__TEXT__WINDOW_RADIUS"),
        "{error}"
    );

    let broken = write("[text\n");
    let error = load::<Example>(Some(&broken), "APP", [])
        .expect_err("syntax")
        .to_string();
    assert!(error.contains("not valid TOML"), "{error}");

    let missing = std::path::Path::new("/nonexistent/casement.toml");
    let error = load::<Example>(Some(missing), "APP", [])
        .expect_err("missing")
        .to_string();
    assert!(error.contains("cannot read config file"), "{error}");
}

#[test]
fn a_wrong_type_names_the_key_its_source_and_the_line() {
    let file = write("name = \"x\"\n\n[text]\nlanguage = \"en\"\nwindow_radius = \"three\"\n");
    let error = load::<Example>(Some(&file), "APP", [])
        .expect_err("string for a number")
        .to_string();
    assert!(
        error.contains("`text.window_radius`")
            && error.contains(&format!("file {}, line 5", file.display()))
            && error.contains("invalid type: string \"three\""),
        "{error}"
    );

    let env = [("APP__TEXT__WINDOW_RADIUS".to_owned(), "three".to_owned())];
    let error = load::<Example>(Some(&file), "APP", env)
        .expect_err("the environment's value is the one read")
        .to_string();
    assert!(
        error.contains("`text.window_radius`")
            && error.contains("environment variable APP__TEXT__WINDOW_RADIUS"),
        "{error}"
    );

    let typo = write("name = \"x\"\n[text]\n\nwindow_radious = 1\n");
    let error = load::<Example>(Some(&typo), "APP", [])
        .expect_err("unknown key")
        .to_string();
    assert!(
        error.contains("`text.window_radious`") && error.contains(", line 4"),
        "{error}"
    );

    let table = write("text = 3\n");
    let error = load::<Example>(Some(&table), "APP", [])
        .expect_err("a number for a section")
        .to_string();
    assert!(
        error.contains("`text`") && error.contains(", line 1"),
        "{error}"
    );
}

#[derive(Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
struct WithSecret {
    token: casement_config::Secret,
    other: Option<casement_config::Secret>,
}

impl Config for WithSecret {
    fn validate(&self) -> Result<(), String> {
        Ok(())
    }
}

#[test]
fn secrets_are_read_but_never_printed() {
    let env = [(
        "APP__TOKEN".to_owned(),
        "s3cr3t-token-0123456789".to_owned(),
    )];
    let config: WithSecret = load(None, "APP", env).expect("loads");
    assert_eq!(config.token.expose(), "s3cr3t-token-0123456789");
    let printed = toml::to_string(&config).expect("serialises");
    let debugged = format!("{config:?}");
    for shown in [&printed, &debugged] {
        assert!(
            !shown.contains("s3cr3t") && shown.contains(casement_config::REDACTED),
            "{shown}"
        );
    }
    assert!(printed.contains("token = \"<redacted>\""), "{printed}");

    // check-config's output read back as a config: refused, not sent as a credential.
    let file = write(&printed);
    let error = load::<WithSecret>(Some(&file), "APP", [])
        .expect_err("placeholder")
        .to_string();
    assert!(
        error.contains("`token`") && error.contains("check-config"),
        "{error}"
    );
}
