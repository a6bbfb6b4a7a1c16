//! `casement audit --wiki`: the polled wiki's pages as the audit's source of truth, read
//! from the wiki itself (`generator=allpages&prop=info`: each page's current revision),
//! for the namespaces and titles `[sources.mediawiki]` indexes. A page missing from the
//! index or behind is fetched at its current revision (restoring one deleted at that
//! revision: the wiki says it is back); an indexed page of this wiki that the listing does
//! not have is deleted. Documents of other sources are not this audit's.

use std::collections::BTreeMap;

use anyhow::Context;
use casement_events::{Change, Event, EventFormat, RevisionRef};
use casement_pipeline::Fetcher;
use casement_pipeline::audit::{DocKey, Expected, Truth};
use serde_json::{Value, json};

use crate::config::CasementConfig;

/// The wiki's pages, as the audit's truth.
pub async fn truth(config: &CasementConfig) -> anyhow::Result<Truth> {
    let mediawiki = &config.sources.mediawiki;
    anyhow::ensure!(
        mediawiki.polling(),
        "casement audit --wiki lists the wiki of sources.mediawiki.api_url: set it"
    );
    let domain = mediawiki
        .polled_domain()
        .context("sources.mediawiki.api_url names no host")?;
    let metrics = casement_pipeline::Metrics::new();
    let fetcher = Fetcher::start(&config.fetch, metrics.fetch.clone())?
        .context("casement audit --wiki needs fetch.api_url")?;
    let wiki = super::poll::check(&fetcher, &domain)
        .await
        .map_err(|e| anyhow::anyhow!("sources.mediawiki.api_url: {e}"))?;
    let access = config.decode().access;
    let namespaces = if mediawiki.namespaces.is_empty() {
        namespaces_of(&fetcher, &domain).await?
    } else {
        mediawiki.namespaces.clone()
    };
    let mut documents = BTreeMap::new();
    for namespace in namespaces {
        let mut from: Option<String> = None;
        loop {
            let mut params = vec![
                ("generator", "allpages".to_owned()),
                ("gapnamespace", namespace.to_string()),
                ("gapfilterredir", "nonredirects".to_owned()),
                ("gaplimit", "500".to_owned()),
                ("prop", "info".to_owned()),
                ("inprop", "url".to_owned()),
            ];
            if let Some(from) = &from {
                params.push(("gapcontinue", from.clone()));
            }
            let answer = fetcher
                .query(&domain, &params)
                .await
                .map_err(|e| anyhow::anyhow!("listing the wiki's pages: {e}"))?;
            for page in answer
                .pointer("/query/pages")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let (Some(page_id), Some(revision), Some(title)) = (
                    page.get("pageid").and_then(Value::as_u64),
                    page.get("lastrevid").and_then(Value::as_u64),
                    page.get("title").and_then(Value::as_str),
                ) else {
                    continue;
                };
                let underscored = title.replace(' ', "_");
                let shape = json!({"meta": {"domain": domain},
                    "page": {"namespace_id": namespace, "page_title": underscored}});
                if !mediawiki.wants(&shape) {
                    continue;
                }
                let doc_id = format!("{}:{page_id}", wiki.wiki_id);
                let event = Event {
                    change: Change::Fetch(RevisionRef {
                        doc_id: doc_id.clone(),
                        tenant: None,
                        revision,
                        domain: domain.clone(),
                        title: Some(underscored),
                        url: page
                            .get("fullurl")
                            .and_then(Value::as_str)
                            .map(str::to_owned),
                        access: access.namespace(namespace),
                        restore: true,
                    }),
                    format: EventFormat::Mediawiki,
                };
                documents.insert(
                    DocKey {
                        tenant: None,
                        doc_id,
                    },
                    Expected::Present {
                        revision,
                        event: Some(Box::new(event)),
                    },
                );
            }
            eprintln!("listed {} pages of {domain}", documents.len());
            from = answer
                .pointer("/continue/gapcontinue")
                .and_then(Value::as_str)
                .map(str::to_owned);
            if from.is_none() {
                break;
            }
        }
    }
    Ok(Truth {
        description: format!("the wiki {} ({} pages)", mediawiki.api_url, documents.len()),
        documents,
        scope: Some(format!("{}:", wiki.wiki_id)),
    })
}

/// Every content namespace the wiki has (`siteinfo`'s namespaces with `content`), when
/// `sources.mediawiki.namespaces` is empty.
async fn namespaces_of(fetcher: &Fetcher, domain: &str) -> anyhow::Result<Vec<i64>> {
    let answer = fetcher
        .query(
            domain,
            &[
                ("meta", "siteinfo".to_owned()),
                ("siprop", "namespaces".to_owned()),
            ],
        )
        .await
        .map_err(|e| anyhow::anyhow!("asking the wiki for its namespaces: {e}"))?;
    let namespaces = answer
        .pointer("/query/namespaces")
        .and_then(Value::as_object)
        .map(|all| {
            all.values()
                .filter(|n| n.get("content").and_then(Value::as_bool) == Some(true))
                .filter_map(|n| n.get("id").and_then(Value::as_i64))
                .collect()
        })
        .unwrap_or_else(|| vec![0]);
    Ok(namespaces)
}
