use clap::Parser;
use tracing_subscriber::{EnvFilter, fmt};

fn main() -> std::process::ExitCode {
    // The sandbox shim of an ACP agent: one thread, no runtime, no logging.
    if let Some(code) = mnote::platform::supervise::shim::dispatch() {
        return code;
    }
    run_cli()
}

#[tokio::main]
async fn run_cli() -> std::process::ExitCode {
    mnote::platform::http::install_tls_provider();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,tower_http=info,rmcp=warn"));
    let json = mnote::config::log_format_json();
    let builder = fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
    let cli = mnote::cli::Cli::parse();
    match mnote::cli::run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
