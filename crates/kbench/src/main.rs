mod tansu;
#[tokio::main]
async fn main() {
    let addr = std::env::args().nth(1).unwrap().parse().unwrap();
    tansu::serve(addr, 0).await.unwrap();
}
