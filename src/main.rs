//! The `bind-operator` binary: parses flags and wires the library together.
//! Logic lives in the library; each subcommand is a thin call into it.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Kubernetes operator that runs BIND9 clusters and manages their zones,
/// records and TSIG keys from custom resources.
#[derive(Parser)]
#[command(name = "bind-operator", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the CustomResourceDefinitions of all four kinds as one
    /// multi-document YAML (pipe into `kubectl apply -f -`).
    Crds {
        /// Instead of printing, write one file per kind plus all.yaml into
        /// this directory (repeatable; regenerates the committed `crds/`).
        #[arg(long, value_name = "DIR")]
        write: Vec<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Crds { write } if write.is_empty() => bind_operator::api::crdgen::all_yaml()
            .map_err(|e| error_chain(&e))
            .and_then(|yaml| write_stdout(&yaml)),
        Command::Crds { write } => write
            .iter()
            .try_for_each(|dir| bind_operator::api::crdgen::write_dir(dir))
            .map_err(|e| error_chain(&e)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("bind-operator: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Prints to stdout; a closed pipe (`| head`) is not an error.
fn write_stdout(text: &str) -> Result<(), String> {
    use std::io::Write;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(format!("failed to write to stdout: {e}"))
        }
        _ => Ok(()),
    }
}

/// "outer: inner: root" so the user sees the cause, not only the context.
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut message = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}
