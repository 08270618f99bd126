fn main() {
    // SAFETY: the first statement of the process, before any thread starts or any connection
    // opens, so nothing else can be calling into SQLite while it is configured.
    unsafe {
        idemcalc::store::sqlite::skip_memory_statistics();
    }
    std::process::exit(idemcalc::cli::main());
}
