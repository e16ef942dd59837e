//! `strom-broker`: starts a single-node Strom broker.
//!
//! With no arguments it listens on 127.0.0.1:9092 and keeps its data in
//! `./data`. `--config server.properties` reads Kafka's broker settings;
//! `--set key=value` overrides any of them.

use std::process::ExitCode;

use strom_broker::launch::{parse_arguments, Command, USAGE};

fn main() -> ExitCode {
    match parse_arguments(std::env::args().skip(1)) {
        Ok(Command::Run(options)) => strom_broker::launch::run(options),
        Ok(Command::Help) => {
            print!("{USAGE}");
            ExitCode::SUCCESS
        }
        Ok(Command::Version) => {
            println!("strom-broker {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("strom-broker: {error}\n\n{USAGE}");
            ExitCode::from(2)
        }
    }
}
