use std::path::PathBuf;

use anyhow::Context;
use casement_query::{ENV_PREFIX, QueryConfig};
use clap::{Parser, Subcommand};

/// Casement query service: answers support-bot queries from the sentence index.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    /// TOML config file (defaults, then this file, then CASEMENT_QUERY__* variables).
    #[arg(long, global = true, env = "CASEMENT_QUERY_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the query API (POST /v1/search) until SIGTERM or Ctrl-C.
    Run,
    /// Load and validate the configuration, print it as TOML, and exit.
    CheckConfig,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    casement_service::exit(|| run(cli))
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let config: QueryConfig =
        casement_config::load(cli.config.as_deref(), ENV_PREFIX, std::env::vars())?;
    match cli.command {
        Command::Run => {
            casement_config::logging::init(&config.log).map_err(anyhow::Error::msg)?;
            casement_service::runtime()?.block_on(casement_query::service::run(
                config,
                casement_service::stop_signal(),
            ))?;
        }
        Command::CheckConfig => print!(
            "{}",
            toml::to_string(&config).context("serialising config")?
        ),
    }
    Ok(())
}
