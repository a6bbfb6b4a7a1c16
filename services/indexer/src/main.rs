use std::path::PathBuf;

use anyhow::Context;
use casement_indexer::{IndexerConfig, config, replay, service};
use casement_pipeline::dry_run::{self, DryRunConfig};
use clap::{Parser, Subcommand};

/// Casement indexer: keeps a sentence-window index in step with a CMS.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    /// TOML config file (defaults, then this file, then CASEMENT_INDEXER__* variables).
    #[arg(long, global = true, env = "CASEMENT_INDEXER_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Replay a revision log (JSONL, optionally .gz) through fence, segmenter and differ,
    /// and print what would be embedded and written. Nothing is stored.
    DryRun {
        /// Revision log; defaults to the bundled sample.
        input: Option<PathBuf>,
        /// Print only the summary, not one line per event.
        #[arg(long)]
        quiet: bool,
    },
    /// Consume change events from Kafka into the index (until SIGTERM or Ctrl-C).
    Run,
    /// Publish a revision log (JSONL, optionally .gz; create, update, rename, delete) to
    /// the configured topic as native events, key = doc_id.
    Replay {
        input: PathBuf,
        /// Milliseconds to wait between events (to watch live updates).
        #[arg(long)]
        pace_ms: Option<u64>,
    },
    /// Load and validate the configuration, print it as TOML, and exit.
    CheckConfig,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    casement_service::exit(|| run(cli))
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let config: IndexerConfig =
        casement_config::load(cli.config.as_deref(), config::ENV_PREFIX, std::env::vars())?;
    match cli.command {
        Command::DryRun { input, quiet } => {
            let input = input.unwrap_or_else(|| {
                PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                    .join("../../sample/18f-handbook/revisions.jsonl")
            });
            let stdout = std::io::stdout();
            let dry_run_config = DryRunConfig {
                text: &config.text,
                events: &config.events,
            };
            dry_run::run(dry_run_config, &input, &mut stdout.lock(), !quiet)?;
        }
        Command::Run => {
            casement_config::logging::init(&config.log).map_err(anyhow::Error::msg)?;
            casement_service::runtime()?
                .block_on(service::run(config, casement_service::stop_signal()))?;
        }
        Command::Replay { input, pace_ms } => {
            let pace = pace_ms.map(std::time::Duration::from_millis);
            let summary = casement_service::runtime()?.block_on(replay::run(
                &config.kafka,
                &input,
                pace,
                true,
            ))?;
            if summary.skipped_lines > 0 {
                eprintln!("{} lines skipped (see above)", summary.skipped_lines);
            }
        }
        Command::CheckConfig => print!(
            "{}",
            toml::to_string(&config).context("serialising config")?
        ),
    }
    Ok(())
}
