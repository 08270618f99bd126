fn main() {
    std::process::exit(idemcalc::cli::main());
}
