//! Verifying a person's token: no verifier, bad `[auth.jwt]`, a key set of RS256 keys.

use super::http::{SECRET, key, search, token};
use super::*;

/// A token sent where no `[auth.jwt]` is configured is refused, not ignored; a
/// configuration that could not verify one fails at start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_without_a_verifier_is_refused_and_bad_jwt_config_fails() {
    let dir = tempfile::tempdir().unwrap();
    let (model, _) = models().await;
    let store = open_store(dir.path(), model.dimension());
    let mut config = QueryConfig::default();
    config.auth.keys = vec![key("staff-bot-key-000001", "staff-bot", Some(&["hr"]))];
    let served = serve(config.clone(), store).await;
    let (status, answer) = search(
        &served.base,
        "staff-bot-key-000001",
        Some(&token(&["hr"], 300, SECRET)),
        json!({"query": "anything"}),
    )
    .await;
    assert_eq!(status, 401, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("[auth.jwt]")
    );

    let invalid = |jwt: JwtConfig| {
        let mut config = config.clone();
        config.auth.jwt = Some(jwt);
        casement_config::Config::validate(&config).unwrap_err()
    };
    assert!(invalid(JwtConfig::default()).contains("exactly one of secret"));
    assert!(
        invalid(JwtConfig {
            secret: "short".into(),
            ..JwtConfig::default()
        })
        .contains("32 bytes")
    );
    let jwks = dir.path().join("jwks.json");
    std::fs::write(&jwks, "{\"keys\": []}").unwrap();
    assert!(
        invalid(JwtConfig {
            jwks_file: Some(jwks),
            ..JwtConfig::default()
        })
        .contains("holds no key")
    );
    // Keys, or a loopback address, or allow_open: never open by accident.
    let mut open = QueryConfig {
        listen: "0.0.0.0:8080".parse().unwrap(),
        ..QueryConfig::default()
    };
    let error = casement_config::Config::validate(&open).unwrap_err();
    assert!(error.contains("auth.allow_open"), "{error}");
    open.auth.allow_open = true;
    casement_config::Config::validate(&open).unwrap();
}

/// An RSA key made with the `openssl` CLI: its PKCS#1 DER (what signs) and its public JWK.
fn rsa_key(dir: &std::path::Path, name: &str, kid: &str) -> (Vec<u8>, Value) {
    let pem = dir.join(format!("{name}.pem"));
    let der = dir.join(format!("{name}.der"));
    let run = |args: &[&str]| {
        let out = std::process::Command::new("openssl")
            .args(args)
            .output()
            .expect("openssl");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    run(&[
        "genrsa",
        "-traditional",
        "-out",
        pem.to_str().unwrap(),
        "2048",
    ]);
    run(&[
        "rsa",
        "-in",
        pem.to_str().unwrap(),
        "-traditional",
        "-outform",
        "DER",
        "-out",
        der.to_str().unwrap(),
    ]);
    let modulus = run(&["rsa", "-in", pem.to_str().unwrap(), "-noout", "-modulus"]);
    let hex = modulus.trim().trim_start_matches("Modulus=");
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    let jwk = json!({"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig",
                     "n": base64url(&bytes), "e": "AQAB"});
    (std::fs::read(der).unwrap(), jwk)
}

fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().fold(0u32, |n, b| n << 8 | u32::from(*b)) << (8 * (3 - chunk.len()));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// `[auth.jwt] jwks_file`: RS256 tokens verified by the key their `kid` names; one signed
/// by another key, naming a key not in the set, or made with HS256 (the public key used
/// as a shared secret) is refused.
#[test]
fn a_key_set_verifies_rs256_tokens_by_kid() {
    use casement_query::auth::UserTokens;
    let dir = tempfile::tempdir().unwrap();
    let (first_der, first) = rsa_key(dir.path(), "first", "sso-2026-a");
    let (_, second) = rsa_key(dir.path(), "second", "sso-2026-b");
    let (stranger_der, _) = rsa_key(dir.path(), "stranger", "sso-2026-a");
    let jwks = dir.path().join("jwks.json");
    std::fs::write(&jwks, json!({"keys": [first, second]}).to_string()).unwrap();
    let users = UserTokens::load(&JwtConfig {
        jwks_file: Some(jwks),
        audience: Some("casement".into()),
        ..JwtConfig::default()
    })
    .unwrap();
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 300;
    let claims = json!({"sub": "dana", "groups": ["hr", "staff"], "aud": "casement", "exp": exp});
    let sign = |der: &[u8], kid: &str| {
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
        header.kid = Some(kid.into());
        jsonwebtoken::encode(
            &header,
            &claims,
            &jsonwebtoken::EncodingKey::from_rsa_der(der),
        )
        .unwrap()
    };
    assert_eq!(
        users.verify(&sign(&first_der, "sso-2026-a")).unwrap(),
        Reader::groups(["hr", "staff"])
    );
    let refused = |token: String| match users.verify(&token) {
        Err(ApiError::UserToken(why)) => why,
        other => panic!("accepted: {other:?}"),
    };
    assert!(refused(sign(&stranger_der, "sso-2026-a")).contains("signature"));
    assert!(refused(sign(&first_der, "sso-2026-b")).contains("signature"));
    assert!(refused(sign(&first_der, "sso-1999")).contains("not in auth.jwt.jwks_file"));
    let hs256 = jsonwebtoken::encode(
        &jsonwebtoken::Header {
            kid: Some("sso-2026-a".into()),
            ..jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256)
        },
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(first["n"].as_str().unwrap().as_bytes()).unwrap(),
    )
    .unwrap();
    assert!(refused(hs256).contains("HS256"));
    let wrong_audience = json!({"sub": "dana", "groups": ["hr"], "aud": "another", "exp": exp});
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
    header.kid = Some("sso-2026-a".into());
    let token = jsonwebtoken::encode(
        &header,
        &wrong_audience,
        &jsonwebtoken::EncodingKey::from_rsa_der(&first_der),
    )
    .unwrap();
    assert!(refused(token).contains("audience"));
}
