//! `kiln`: validate, inspect, decode and convert Kiln v2 files (the
//! commands live in the `kiln_cli` library, which the fuzz targets share).

fn main() -> std::process::ExitCode {
    kiln_cli::main()
}
