use std::path::PathBuf;

use anyhow::Context;
use casement_indexer::{IndexerConfig, config, dry_run};
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
    /// Load and validate the configuration, print it as TOML, and exit.
    CheckConfig,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
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
            dry_run::run(&config, &input, &mut stdout.lock(), !quiet)?;
        }
        Command::CheckConfig => print!(
            "{}",
            toml::to_string(&config).context("serialising config")?
        ),
    }
    Ok(())
}
