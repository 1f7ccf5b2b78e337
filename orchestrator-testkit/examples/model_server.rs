//! Runs a scripted model server until killed, for driving agent CLIs by hand.
//!
//! ```text
//! cargo run -p orchestrator-testkit --example model_server -- SCRIPT.json [LOG.jsonl]
//! ```
//! Prints the base URL on stdout; appends every request (with the answer given) to LOG.jsonl.

use std::io::Write;

use orchestrator_testkit::{ModelServer, Script};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let script: Script = match args.next() {
        Some(path) => serde_json::from_str(&std::fs::read_to_string(path)?)?,
        None => Script::new(),
    };
    let log_path = args.next();
    let server = ModelServer::start(script).await?;
    println!("{}", server.url());
    std::io::stdout().flush()?;
    let mut written = 0;
    loop {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let requests = server.requests();
        if let Some(path) = &log_path {
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?;
            for request in &requests[written..] {
                writeln!(file, "{}", request.to_json())?;
            }
        }
        written = requests.len();
    }
}
