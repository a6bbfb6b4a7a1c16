use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use casement::config::{self, CasementConfig};
use clap::{Parser, Subcommand};

/// Casement all-in-one: indexes a wiki's changes and answers searches over them, in one
/// process with an embedded index (no Kafka, no Qdrant server).
#[derive(Debug, Parser)]
#[command(about, version = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("CASEMENT_COMMIT"),
    ", built ",
    env!("CASEMENT_BUILD_DATE"),
    ")"
))]
struct Cli {
    /// TOML config file (defaults, then this file, then CASEMENT__* variables).
    #[arg(long, global = true, env = "CASEMENT_CONFIG")]
    config: Option<PathBuf>,
    /// Where the index and the source positions live (overrides `data_dir`).
    #[arg(long, global = true)]
    data_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Index and serve: replay revision logs, then watch folders and take webhook events,
    /// answering searches all along. With no source given, runs the bundled sample.
    Run {
        /// Revision log (JSONL, optionally .gz) or directory of logs to replay (repeatable).
        #[arg(long)]
        replay: Vec<PathBuf>,
        /// Folder of Markdown, HTML or text files to watch (repeatable).
        #[arg(long)]
        watch: Vec<PathBuf>,
        /// Milliseconds between replayed events (to watch live updates).
        #[arg(long)]
        pace_ms: Option<u64>,
        /// Address of the HTTP API, host:port (`127.0.0.1:8080`, `localhost:8080`,
        /// `0.0.0.0:8080`); overrides `listen`.
        #[arg(long, value_parser = casement_config::listen::parse)]
        listen: Option<SocketAddr>,
    },
    /// Index revision logs and folders of documents, print a summary, and exit. Logs only
    /// warnings unless `log.filter` is set: a progress line and the summary say the rest.
    Backfill {
        /// Revision logs (.jsonl, .jsonl.gz) to replay, and folders whose Markdown, HTML,
        /// text and wikitext files are indexed as documents (id: the path in the folder
        /// without its extension; the folder's revision logs are replayed too).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Put before each document id of a folder (overrides
        /// `sources.watch.doc_id_prefix`), e.g. `handbook:` so that documents of several
        /// folders do not collide.
        #[arg(long)]
        doc_id_prefix: Option<String>,
    },
    /// Load and validate the configuration, print it as TOML, and exit.
    CheckConfig,
    /// Give back the disk of the embedded index's write-ahead log while no service has it
    /// open (a running one compacts by itself past `store.edge.compact_wal_bytes`, and at
    /// every start); print the sizes before and after.
    Compact,
    /// Copy the data directory (the index, the source positions, the webhook's accepted
    /// events, the dead letters) into the new directory OUT while no service has it open,
    /// with a manifest of every file's SHA-256; `restore` brings it back.
    Snapshot {
        /// Where the snapshot goes (must not exist; written as OUT.partial, then renamed).
        out: PathBuf,
    },
    /// Replace the data directory with a snapshot, after checking every file against its
    /// manifest; the sources then resume where the snapshot's index stands.
    Restore {
        /// A directory written by `casement snapshot`.
        snapshot: PathBuf,
        /// Replace a data directory that holds anything (it is emptied first).
        #[arg(long)]
        force: bool,
    },
    /// Compare the index with a source of truth and report documents missing from it,
    /// behind or ahead of the source, left behind (deleted in the source or absent from it)
    /// and indexed at the right revision with wrong points. Exit code 0: the index matches;
    /// 1: it does not; 2: could not run, or the fix was refused. The data directory must not
    /// be open in another process.
    Audit {
        /// A revision log (JSONL, optionally .gz: each document's last event is the truth) or
        /// a listing (JSONL lines {"doc_id", "revision", "tenant"?, "deleted"?}: revisions
        /// only, no content to compare).
        #[arg(required_unless_present = "wiki")]
        source: Option<PathBuf>,
        /// The source of truth is the wiki of `sources.mediawiki.api_url` itself: its
        /// pages' current revisions (`allpages`), for the namespaces and titles indexed. The
        /// repair after a gap in its recent changes.
        #[arg(long, conflicts_with = "source")]
        wiki: bool,
        /// Repair what was found through the pipeline (upserts of the source's revisions,
        /// deletes), then audit again.
        #[arg(long)]
        fix: bool,
        /// Let --fix delete more than audit.max_delete_share of the index's documents.
        #[arg(long, requires = "fix")]
        force: bool,
        /// Print the report as JSON (figures and every finding).
        #[arg(long)]
        json: bool,
        /// Also write the casement_audit_* metrics to this file (Prometheus text format, for
        /// node_exporter's textfile collector; replaced atomically).
        #[arg(long)]
        metrics_file: Option<PathBuf>,
        /// Documents listed per finding in the text report.
        #[arg(long, default_value_t = 20)]
        list: usize,
    },
    /// Build the index anew under another embedding model, enrichment or window radius
    /// (`--set embedder.precision=int8`, `--set text.window_radius=3`) from the records the
    /// index stores, with no call to the CMS; run the golden set on both and swap the new
    /// one in if it is not worse by more than --margin. The old index is kept for
    /// --rollback. A killed migration resumes when the same command runs again. Exit code
    /// 0: swapped (or rolled back); 1: refused by the gate; 2: could not run; 3: swapped on a
    /// Qdrant server, the catch-up from the replaced collection pending (the next run
    /// finishes it). An embedded data directory must not be open in another process; on a
    /// server, services keep running beside it.
    Migrate {
        /// A setting of the new index, `section.key=value` (repeatable).
        #[arg(long, value_name = "KEY=VALUE", required_unless_present = "rollback")]
        set: Vec<String>,
        /// Swap even if the new index is worse than the margin, or without a golden set.
        #[arg(long)]
        force: bool,
        /// How much lower the new index's recall@k and MRR@k on the golden set may be.
        #[arg(long, default_value_t = 0.02)]
        margin: f64,
        /// Hours the replaced index is kept for --rollback (deleted by a later migrate).
        #[arg(long, default_value_t = 168)]
        keep_hours: u64,
        /// Serve the index the last migration replaced again, brought up to date first.
        #[arg(long, conflicts_with_all = ["set", "force"])]
        rollback: bool,
        /// Ask the `casement run` serving this data directory (it keeps indexing and
        /// answering searches from the old index until the swap), e.g. http://127.0.0.1:8080.
        #[arg(long)]
        url: Option<String>,
        /// Bearer token (an operator key, bound to no tenant), with --url and `[auth] keys`.
        #[arg(long, env = "CASEMENT_API_KEY", hide_env_values = true)]
        api_key: Option<String>,
    },
    /// Apply the deletes a running service holds (more than sources.max_delete_share of the
    /// index's live documents from one source within sources.delete_window_secs, or a
    /// watched folder that lists nothing), and let deletes through for one window.
    ReleaseDeletes {
        /// The service (`casement run`); default: `listen` of the config.
        #[arg(long)]
        url: Option<String>,
        /// Bearer token (an operator key, bound to no tenant): the admin routes need one.
        #[arg(long, env = "CASEMENT_API_KEY", hide_env_values = true)]
        api_key: Option<String>,
    },
    /// Print what a page becomes, as a bot reads it: its text with template tags, page
    /// furniture and markup removed and lists numbered, its links, and (--windows) every
    /// window with its offsets into the file. Nothing is indexed.
    Show {
        /// A Markdown (.md, .mdx), HTML, text or wikitext (.wiki) file.
        file: PathBuf,
        /// markdown | html | text | wikitext (default: from the extension).
        #[arg(long)]
        format: Option<String>,
        /// The page's address, against which relative links resolve.
        #[arg(long)]
        url: Option<String>,
        /// Also print every window and where it came from in the file.
        #[arg(long)]
        windows: bool,
    },
    /// Run a golden set (JSONL: query, doc_id, optional text, tenant, id) against a running
    /// service over HTTP; print recall@k, MRR@k and each failing query with what came back
    /// first. Exit code 0: every case passed; 1: some failed; 2: could not run.
    Eval {
        /// The golden set, one JSON object per line.
        golden: PathBuf,
        /// The service (`casement run` or `casement-query run`); default: `listen` of the
        /// config.
        #[arg(long)]
        url: Option<String>,
        /// A case passes when its document (with its text) is in the first k windows;
        /// default: `eval.k` of the config (5).
        #[arg(long)]
        k: Option<usize>,
        /// Bearer token, when the service has `[auth] keys`.
        #[arg(long, env = "CASEMENT_API_KEY", hide_env_values = true)]
        api_key: Option<String>,
        /// Print the report as JSON (figures and every case) instead of text.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Eval {
        golden,
        url,
        k,
        api_key,
        json,
    } = &cli.command
    {
        let config = match casement_config::load::<CasementConfig>(
            cli.config.as_deref(),
            config::ENV_PREFIX,
            std::env::vars(),
        ) {
            Ok(config) => config,
            Err(error) => {
                eprintln!("error: {error:#}");
                return ExitCode::from(casement::eval::COULD_NOT_RUN);
            }
        };
        let args = casement::eval::EvalArgs {
            golden: golden.clone(),
            url: url
                .clone()
                .unwrap_or_else(|| format!("http://{}", config.listen)),
            k: k.unwrap_or(config.eval.k),
            api_key: api_key.clone(),
        };
        return casement::eval::command(&args, *json);
    }
    if let Command::Show {
        file,
        format,
        url,
        windows,
    } = &cli.command
    {
        let outcome = (|| -> anyhow::Result<()> {
            let config: CasementConfig =
                casement_config::load(cli.config.as_deref(), config::ENV_PREFIX, std::env::vars())?;
            casement::show::command(
                &config.text,
                file,
                format.as_deref(),
                url.as_deref(),
                *windows,
                &mut std::io::stdout().lock(),
            )
        })();
        return match outcome {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("error: {error:#}");
                ExitCode::from(2)
            }
        };
    }
    if let Command::ReleaseDeletes { url, api_key } = &cli.command {
        let outcome = (|| -> anyhow::Result<()> {
            let config: CasementConfig =
                casement_config::load(cli.config.as_deref(), config::ENV_PREFIX, std::env::vars())?;
            let url = url
                .clone()
                .unwrap_or_else(|| format!("http://{}", config.listen));
            casement_service::runtime()?
                .block_on(casement::deletes::remote(&url, api_key.as_deref()))
        })();
        return match outcome {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("error: {error:#}");
                ExitCode::from(2)
            }
        };
    }
    if let Command::Audit {
        source,
        wiki,
        fix,
        force,
        json,
        metrics_file,
        list,
    } = &cli.command
    {
        let args = casement::audit::AuditArgs {
            source: source.clone(),
            wiki: *wiki,
            fix: *fix,
            force: *force,
            json: *json,
            metrics_file: metrics_file.clone(),
            list: *list,
        };
        let outcome = (|| -> anyhow::Result<u8> {
            let mut config: CasementConfig =
                casement_config::load(cli.config.as_deref(), config::ENV_PREFIX, std::env::vars())?;
            if let Some(dir) = &cli.data_dir {
                config.data_dir = dir.clone();
            }
            casement::snapshot::check_not_restoring(&config.data_dir)?;
            casement_config::logging::init(&config.log).map_err(anyhow::Error::msg)?;
            casement_service::runtime()?.block_on(casement::audit::command(config, args))
        })();
        return match outcome {
            Ok(code) => ExitCode::from(code),
            Err(error) => {
                eprintln!("error: {error:#}");
                ExitCode::from(casement::audit::COULD_NOT_RUN)
            }
        };
    }
    if let Command::Migrate {
        set,
        force,
        margin,
        keep_hours,
        rollback,
        url,
        api_key,
    } = &cli.command
    {
        let args = casement::migrate::MigrateArgs {
            set: set.clone(),
            force: *force,
            margin: *margin,
            keep_hours: *keep_hours,
            max_passes: 5,
        };
        let outcome = (|| -> anyhow::Result<u8> {
            let load = |extra: Vec<(String, String)>| -> anyhow::Result<CasementConfig> {
                let mut config: CasementConfig = casement_config::load(
                    cli.config.as_deref(),
                    config::ENV_PREFIX,
                    std::env::vars().chain(extra),
                )?;
                if let Some(dir) = &cli.data_dir {
                    config.data_dir = dir.clone();
                }
                Ok(config)
            };
            if let Some(url) = url {
                let body = if *rollback {
                    serde_json::json!({ "keep_hours": keep_hours })
                } else {
                    serde_json::json!({
                        "set": set, "force": force, "margin": margin, "keep_hours": keep_hours,
                    })
                };
                return casement_service::runtime()?.block_on(casement::migrate::http::remote(
                    url,
                    api_key.as_deref(),
                    body,
                    *rollback,
                ));
            }
            let config = load(Vec::new())?;
            casement::snapshot::check_not_restoring(&config.data_dir)?;
            casement_config::logging::init(&config.log).map_err(anyhow::Error::msg)?;
            let source = casement::migrate::ConfigSource {
                file: cli.config.clone(),
            };
            if *rollback {
                return casement_service::runtime()?.block_on(casement::migrate::rollback(
                    config,
                    source,
                    *keep_hours,
                ));
            }
            let runtime = casement_service::runtime()?;
            let target = match source.target(&config, set) {
                Ok(target) => target,
                // Pairs already in the configuration: a migration stopped after its swap is
                // finished by the same command once its pairs are set.
                Err(error) => {
                    return match runtime.block_on(casement::migrate::finish_pending(&config)) {
                        Ok(true) => Ok(casement::migrate::SWAPPED),
                        Ok(false) => Err(error),
                        Err(finish) => Err(finish.context(format!("{error:#}"))),
                    };
                }
            };
            runtime.block_on(casement::migrate::command(config, target, args))
        })();
        return match outcome {
            Ok(code) => ExitCode::from(code),
            Err(error) => {
                eprintln!("error: {error:#}");
                ExitCode::from(casement::migrate::COULD_NOT_RUN)
            }
        };
    }
    casement_service::exit(|| run(cli))
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let mut config: CasementConfig =
        casement_config::load(cli.config.as_deref(), config::ENV_PREFIX, std::env::vars())?;
    if let Some(dir) = cli.data_dir {
        config.data_dir = dir;
    }
    if !matches!(cli.command, Command::Restore { .. } | Command::CheckConfig) {
        casement::snapshot::check_not_restoring(&config.data_dir)?;
    }
    match cli.command {
        Command::Run {
            replay,
            watch,
            pace_ms,
            listen,
        } => {
            config.sources.replay.paths.extend(replay);
            config.sources.watch.dirs.extend(watch);
            if let Some(pace) = pace_ms {
                config.sources.replay.pace_ms = pace;
            }
            if let Some(listen) = listen {
                config.listen = listen;
            }
            casement_config::logging::init(&config.log).map_err(anyhow::Error::msg)?;
            casement_service::runtime()?.block_on(casement::run::run(
                config,
                casement::migrate::ConfigSource { file: cli.config },
                casement_service::stop_signal(),
            ))
        }
        Command::Backfill {
            paths,
            doc_id_prefix,
        } => {
            if let Some(prefix) = doc_id_prefix {
                config.sources.watch.doc_id_prefix = prefix;
            }
            // A batch command: its progress line and summary say what the per-document
            // info lines would, so those are off unless the operator set a filter.
            if config.log.filter == CasementConfig::default().log.filter {
                config.log.filter = "warn".into();
            }
            casement_config::logging::init(&config.log).map_err(anyhow::Error::msg)?;
            casement_service::runtime()?.block_on(casement::backfill::backfill(config, paths))
        }
        Command::Eval { .. }
        | Command::Audit { .. }
        | Command::Migrate { .. }
        | Command::ReleaseDeletes { .. }
        | Command::Show { .. } => {
            unreachable!("handled in main")
        }
        Command::Compact => {
            let store = config.store();
            if store.backend != casement_store::Backend::Edge {
                anyhow::bail!(
                    "store.backend = \"server\": a Qdrant server manages its own write-ahead log; compact concerns the embedded store"
                );
            }
            let (before, after) = casement_store::EdgeStore::compact_closed(&store.edge.path)?;
            let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
            println!(
                "compact: {}: write-ahead log {:.1} MiB -> {:.1} MiB ({:.1} MiB reclaimed); segments {:.1} MiB",
                store.edge.path.display(),
                mib(before.wal),
                mib(after.wal),
                mib(before.wal.saturating_sub(after.wal)),
                mib(after.segments)
            );
            Ok(())
        }
        Command::Snapshot { out } => {
            let started = std::time::Instant::now();
            let manifest = casement::snapshot::snapshot(&config, &out)?;
            println!(
                "snapshot: {} -> {}: {} files, {:.1} MiB of data ({:.1} MiB on disk: the \
                 index's empty regions stay holes) in {:.1} s",
                config.data_dir.display(),
                out.display(),
                manifest.files.len(),
                manifest.bytes() as f64 / (1024.0 * 1024.0),
                casement_store::allocated_bytes(&out) as f64 / (1024.0 * 1024.0),
                started.elapsed().as_secs_f64()
            );
            Ok(())
        }
        Command::Restore { snapshot, force } => {
            let started = std::time::Instant::now();
            let manifest = casement::snapshot::restore(&config, &snapshot, force)?;
            println!(
                "restore: {} -> {}: {} files checked and copied, {:.1} MiB in {:.1} s \
                 (taken from {} by Casement {})",
                snapshot.display(),
                config.data_dir.display(),
                manifest.files.len(),
                manifest.bytes() as f64 / (1024.0 * 1024.0),
                started.elapsed().as_secs_f64(),
                manifest.data_dir.display(),
                manifest.casement_version
            );
            Ok(())
        }
        Command::CheckConfig => {
            print!(
                "{}",
                toml::to_string(&config).context("serialising config")?
            );
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every command and argument says what it is in `--help`, so the CLI does not need
    /// the documentation.
    #[test]
    fn every_command_and_argument_is_described() {
        fn walk(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in command.get_arguments() {
                let id = arg.get_id().as_str();
                if arg.is_hide_set() || id == "help" || id == "version" {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in command.get_subcommands() {
                let name = format!("{path} {}", sub.get_name());
                if sub.get_about().is_none() && sub.get_name() != "help" {
                    missing.push(name.clone());
                }
                walk(sub, &name, missing);
            }
        }
        let mut missing = Vec::new();
        walk(&super::Cli::command(), "casement", &mut missing);
        assert!(missing.is_empty(), "without a description: {missing:?}");
    }
}
