//! `casement eval GOLDEN`: a golden set run against a running service (the all-in-one or
//! the query service) over HTTP, each case as the `POST /v1/search` a bot sends, scored by
//! the query service's own rules (`casement_query::eval::score`). Exit codes: 0 every case
//! passed, 1 some failed, 2 the run could not finish (the golden file, the service).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use casement_query::api::{ErrorBody, SearchRequest, SearchResponse};
use casement_query::eval::{GoldenSet, Report, judge};

/// Every case passed.
pub const PASSED: u8 = 0;
/// Some case failed.
pub const FAILED: u8 = 1;
/// The run could not finish: a missing or malformed golden file, a service that cannot be
/// reached or refuses a search.
pub const COULD_NOT_RUN: u8 = 2;

/// One search's deadline (the service's own is `limits.request_timeout_ms`).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone)]
pub struct EvalArgs {
    pub golden: PathBuf,
    /// The service's base URL, e.g. `http://127.0.0.1:8080`.
    pub url: String,
    pub k: usize,
    pub api_key: Option<String>,
}

/// Runs every case of the golden set against the service at `args.url`, in file order.
pub async fn eval(args: &EvalArgs) -> anyhow::Result<Report> {
    let set = GoldenSet::load(&args.golden)?;
    if args.k == 0 {
        bail!("--k must be at least 1");
    }
    let http = reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .build()
        .context("HTTP client")?;
    let endpoint = format!("{}/v1/search", args.url.trim_end_matches('/'));
    let mut results = Vec::with_capacity(set.cases.len());
    for case in &set.cases {
        let body = SearchRequest {
            query: case.case.query.clone(),
            top_k: Some(args.k),
            tenant: case.case.tenant.clone(),
            ..SearchRequest::default()
        };
        let mut request = http.post(&endpoint).json(&body);
        if let Some(key) = &args.api_key {
            request = request.bearer_auth(key);
        }
        let name = case.name();
        let response = match request.send().await {
            Ok(response) => response,
            // Nothing answers there: the service, not the case, is what is wrong.
            Err(error) if error.is_connect() => bail!(
                "cannot reach the service at {}: {error:#} (is `casement run` up? --url or \
                 the config's `listen` name where it listens)",
                args.url
            ),
            Err(error) => {
                return Err(error).with_context(|| format!("case {name}: POST {endpoint}"));
            }
        };
        let status = response.status();
        let text = response
            .text()
            .await
            .with_context(|| format!("case {name}: reading the answer"))?;
        if !status.is_success() {
            let message = serde_json::from_str::<ErrorBody>(&text)
                .map(|body| body.error.message)
                .unwrap_or(text);
            bail!("case {name}: POST {endpoint} answered {status}: {message}");
        }
        let answer: SearchResponse = serde_json::from_str(&text).with_context(|| {
            format!("case {name}: the answer of {endpoint} is not a search response")
        })?;
        results.push(judge(case, &answer.windows, args.k));
    }
    Ok(Report::new(args.k, results))
}

/// Runs [`eval`] and prints the report (text, or JSON with `json`), returning the exit code.
pub fn command(args: &EvalArgs, json: bool) -> ExitCode {
    let outcome = casement_service::runtime().and_then(|runtime| runtime.block_on(eval(args)));
    match outcome {
        Ok(report) => {
            if json {
                match serde_json::to_string_pretty(&report) {
                    Ok(text) => println!("{text}"),
                    Err(error) => {
                        eprintln!("error: {error}");
                        return ExitCode::from(COULD_NOT_RUN);
                    }
                }
            } else {
                print!("{}", report.render());
            }
            ExitCode::from(if report.failures == 0 { PASSED } else { FAILED })
        }
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(COULD_NOT_RUN)
        }
    }
}
