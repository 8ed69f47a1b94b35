fn main() {
    std::process::exit(vmlab::cli::main(std::env::args().collect()));
}
