
/// Two nodes of one config (no shared state at all: each its own journal) in front of the same
/// accounts: a turn one node answered goes, through the other, to the account that made its
/// items — the seal carries the maker, so nothing needs to be shared.
#[tokio::test]
async fn another_node_of_the_same_config_reads_the_seal() {
    let first_node = Harness::start().await;
    let second_node = Harness::on_mock(
        first_node.mock_base.clone(),
        first_node.mock.clone(),
        |text| text,
        Arc::new(SystemClock),
    )
    .await;
    let mut home = 0;
    for round in 0..4 {
        let first_input = vec![user(&format!("two nodes {round}: hello"))];
        let (status, maker, first, _) =
            send(&first_node, "/v1/responses", turn(first_input.clone())).await;
        assert_eq!(status, 200, "{first}");
        // The second node's DRR has its own phase; some traffic there moves it on.
        other_traffic(&second_node, round + 1).await;
        let mut second_input = first_input;
        second_input.extend(output_items(&first));
        second_input.push(user(&format!("two nodes {round}: again")));
        let (status, served, body, _) =
            send(&second_node, "/v1/responses", turn(second_input)).await;
        assert_eq!(status, 200, "{body}");
        if served == maker {
            home += 1;
        }
    }
    assert_eq!(home, 4, "every second turn, through the other node, reached its maker");
}
