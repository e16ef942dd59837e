//! `strom`: the command-line program (see the `strom_tools` crate docs).

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    strom_tools::run(strom_tools::cli::Arguments::parse())
}
