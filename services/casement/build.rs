//! `casement --version`: the version, the commit and the build date.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// `YYYY-MM-DD` of a Unix time (the civil-from-days algorithm, proleptic Gregorian).
fn date(secs: u64) -> String {
    let days = (secs / 86_400) as i64 + 719_468;
    let era = days.div_euclid(146_097);
    let doe = days.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    // SOURCE_DATE_EPOCH for reproducible builds, else now.
    let secs = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
        });
    println!(
        "cargo:rustc-env=CASEMENT_COMMIT={commit}{}",
        if dirty { "-modified" } else { "" }
    );
    println!("cargo:rustc-env=CASEMENT_BUILD_DATE={}", date(secs));
    // Again when the checked-out commit changes, not on every build (a path that does not
    // exist would make Cargo run this every time).
    println!("cargo:rerun-if-changed=build.rs");
    let head = git(&["rev-parse", "--git-path", "HEAD"]);
    let common = git(&["rev-parse", "--git-common-dir"]);
    let refs = common.as_ref().map(|d| format!("{d}/refs/heads"));
    let packed = common.map(|d| format!("{d}/packed-refs"));
    for path in [head, refs, packed].into_iter().flatten() {
        if std::path::Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
}
