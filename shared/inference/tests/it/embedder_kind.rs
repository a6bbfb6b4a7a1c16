//! `embedder.kind` chooses the embedder: `load_embedder` builds the hosted one against an
//! OpenAI-shaped stub on localhost (the real async-openai client runs), and bad or
//! incomplete settings fail naming the key. Nothing here needs the ONNX model.

use crate::support::stub_http;

use casement_inference::{
    Candidate, EmbedderConfig, EmbedderKind, RemoteConfig, RerankerConfig, load_embedder,
};
use serde_json::json;

const DIMENSION: usize = 5;

/// An OpenAI-shaped embeddings endpoint answering `DIMENSION`-long vectors whose first
/// component is the text's length.
fn embeddings_stub() -> stub_http::StubServer {
    stub_http::start(|path, body| {
        if path != "/v1/embeddings" {
            return (404, json!({"error": {"message": "no such route"}}));
        }
        let data: Vec<_> = body["input"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .enumerate()
            .map(|(i, text)| {
                let mut vector = vec![1.0f32; DIMENSION];
                vector[0] = text.as_str().map_or(0, str::len) as f32;
                json!({"object": "embedding", "index": i, "embedding": vector})
            })
            .collect();
        (
            200,
            json!({"object": "list", "model": body["model"], "data": data,
                   "usage": {"prompt_tokens": 1, "total_tokens": 1}}),
        )
    })
}

fn parse(text: &str) -> Result<EmbedderConfig, String> {
    toml::from_str(text).map_err(|e| e.to_string())
}

#[test]
fn the_openai_kind_loads_the_hosted_embedder_from_config() {
    let stub = embeddings_stub();
    let config = parse(&format!(
        "kind = \"openai\"\n\
         [openai]\n\
         base_url = \"{}\"\n\
         model = \"stub-embed-5\"\n\
         api_key = \"config-key\"\n\
         batch_size = 2\n",
        stub.base_url
    ))
    .expect("parses");
    assert_eq!(config.kind, EmbedderKind::Openai);
    let embedder = load_embedder(&config).expect("connects");
    assert_eq!(
        embedder.dimension(),
        DIMENSION,
        "the dimension is the endpoint's"
    );
    assert_eq!(embedder.model_id(), "openai:stub-embed-5");
    let texts = ["a", "bbb", "cc"];
    let vectors = embedder.embed(&texts).expect("embeds");
    assert_eq!(vectors.len(), texts.len());
    for (text, vector) in texts.iter().zip(&vectors) {
        assert_eq!(vector.len(), DIMENSION);
        let norm = (text.len().pow(2) as f32 + (DIMENSION - 1) as f32).sqrt();
        assert!(
            (vector[0] - text.len() as f32 / norm).abs() < 1e-6,
            "{vector:?}"
        );
    }
    let requests = stub.requests.lock().expect("log").clone();
    assert_eq!(requests.len(), 1 + 2, "one probe, then two batches of 2");
    assert!(requests.iter().all(|r| r.path == "/v1/embeddings"));
    assert!(requests.iter().all(|r| r.body["model"] == "stub-embed-5"));
    assert!(
        requests
            .iter()
            .all(|r| r.authorization == "Bearer config-key")
    );
}

#[test]
fn without_a_key_in_config_the_key_comes_from_the_named_variable() {
    let stub = embeddings_stub();
    // A variable cargo sets for the test process (setting one here would need `unsafe`).
    let variable = "CARGO_PKG_NAME";
    let config = EmbedderConfig {
        kind: EmbedderKind::Openai,
        openai: Some(RemoteConfig {
            base_url: stub.base_url.clone(),
            model: "m".to_owned(),
            api_key_env: variable.to_owned(),
            api_key: None,
            ..RemoteConfig::default()
        }),
        ..EmbedderConfig::default()
    };
    load_embedder(&config).expect("connects");
    let expected = format!("Bearer {}", std::env::var(variable).unwrap_or_default());
    let requests = stub.requests.lock().expect("log").clone();
    assert_eq!(requests[0].authorization.trim(), expected.trim());
}

#[test]
fn a_config_without_kind_is_the_onnx_embedder_as_before() {
    let config = parse("precision = \"int8\"\nmax_tokens = 64\n").expect("parses");
    assert_eq!(config.kind, EmbedderKind::Onnx);
    assert_eq!(config.openai, None);
    assert_eq!(
        config,
        EmbedderConfig {
            precision: casement_inference::Precision::Int8,
            max_tokens: 64,
            ..EmbedderConfig::default()
        }
    );
    assert_eq!(EmbedderConfig::default().validate(), Ok(()));
    // Serialised, the default names its kind and has no `openai` table.
    let written = toml::to_string(&EmbedderConfig::default()).expect("serialises");
    assert!(written.contains("kind = \"onnx\""), "{written}");
    assert!(!written.contains("openai"), "{written}");
    assert_eq!(parse(&written), Ok(EmbedderConfig::default()));
}

#[test]
fn an_unknown_kind_fails_to_parse_naming_the_key() {
    let error = parse("kind = \"onyx\"\n").expect_err("unknown kind");
    assert!(
        error.contains("kind = \"onyx\"") && error.contains("\"onnx\" or \"openai\""),
        "{error}"
    );
    // The message names the key by itself, whatever the format or layer reports around it.
    let error = serde_json::from_value::<EmbedderConfig>(json!({"kind": "OpenAI"}))
        .expect_err("kinds are lowercase")
        .to_string();
    assert!(error.contains("kind = \"OpenAI\""), "{error}");
    // Unknown keys stay rejected, inside the `openai` table too.
    let error = parse("kind = \"openai\"\n[openai]\nmodle = \"x\"\n").expect_err("typo");
    assert!(error.contains("modle"), "{error}");
}

#[test]
fn the_openai_kind_without_its_endpoint_or_model_is_a_clear_error() {
    let no_table = parse("kind = \"openai\"\n").expect("parses");
    for error in [
        no_table.validate().expect_err("invalid"),
        load_embedder(&no_table).err().expect("fails").to_string(),
    ] {
        assert!(
            error.contains("kind = \"openai\" needs an `openai` table"),
            "{error}"
        );
    }
    let no_model = parse("kind = \"openai\"\n[openai]\nmodel = \"\"\n").expect("parses");
    let error = load_embedder(&no_model).err().expect("fails").to_string();
    assert!(
        error.contains("openai.base_url and openai.model"),
        "{error}"
    );
    // A hosted table left under the ONNX kind would be silently ignored: rejected instead.
    let ignored = parse("[openai]\nmodel = \"m\"\n").expect("parses");
    let error = load_embedder(&ignored).err().expect("fails").to_string();
    assert!(error.contains("kind = \"onnx\""), "{error}");
}

#[test]
fn rerankers_other_than_rescoring_build_without_an_embedder() {
    assert!(!RerankerConfig::None.needs_embedder());
    assert!(RerankerConfig::None.build(None).expect("builds").is_none());

    let rescoring = RerankerConfig::Rescoring { weight: 0.4 };
    assert!(rescoring.needs_embedder());
    let error = rescoring
        .build(None)
        .err()
        .expect("no embedder")
        .to_string();
    assert!(error.contains("needs an embedder"), "{error}");

    let stub = stub_http::start(|_, body| {
        let count = body["documents"].as_array().map_or(0, Vec::len);
        let results: Vec<_> = (0..count)
            .map(|i| json!({"index": i, "relevance_score": i as f32}))
            .collect();
        (200, json!({"results": results}))
    });
    let remote = RerankerConfig::Remote(RemoteConfig {
        base_url: stub.base_url.clone(),
        model: "rerank-stub".to_owned(),
        api_key: Some("k".into()),
        ..RemoteConfig::default()
    });
    assert!(!remote.needs_embedder());
    let reranker = remote.build(None).expect("builds").expect("a reranker");
    let candidates = ["x", "y"].map(|text| Candidate {
        text,
        retrieval_score: 0.0,
        ..Default::default()
    });
    assert_eq!(
        reranker.score("q", &candidates).expect("scores"),
        vec![0.0, 1.0]
    );
}
