//! The `ledgerlet` binary: see `ledgerlet --help`.

fn main() -> std::process::ExitCode {
    ledgerlet::cli::main()
}
