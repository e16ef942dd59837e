use std::net::{IpAddr, Ipv4Addr};

use base64::Engine;
use strom_protocol::records::{Compression, HeaderInput, RecordBatchBuilder};

use super::*;
use crate::fake_broker::FakeBroker;
use crate::view::Viewer;

/// `orders`-0 as the fake broker holds it (log start 2, high watermark
/// 10): batches [2, 3] [4, 5] [6, 7], a commit marker at 8, then [9].
/// Record N has timestamp N × 1000; 2 is JSON, 3 binary, 5 has a header.
fn batches() -> Vec<Bytes> {
    let data = |base: i64, values: &[&[u8]]| {
        let mut builder = RecordBatchBuilder::new(Compression::None).with_base_offset(base);
        for (index, value) in values.iter().enumerate() {
            let offset = base + index as i64;
            let key = format!("key-{offset}");
            let headers: &[HeaderInput<'_>] = if offset == 5 {
                &[(b"trace".as_slice(), Some(b"abc".as_slice()))]
            } else {
                &[]
            };
            builder
                .append(offset * 1000, Some(key.as_bytes()), Some(value), headers)
                .expect("record");
        }
        builder.build().expect("batch")
    };
    let mut marker = RecordBatchBuilder::new(Compression::None)
        .with_base_offset(8)
        .with_producer(7, 0, -1)
        .with_transactional(true)
        .with_control(true);
    marker
        .append(8000, Some(&[0, 0, 0, 1]), Some(&[0, 0, 0, 0, 0, 0]), &[])
        .expect("marker");
    vec![
        data(2, &[br#"{"id":2,"items":[1,2]}"#, &[0xff, 0x00]]),
        data(4, &[b"value-4", b"value-5"]),
        data(6, &[b"value-6", b"value-7"]),
        marker.build().expect("marker batch"),
        data(9, &[b"value-9"]),
    ]
}

fn broker() -> FakeBroker {
    FakeBroker {
        batches: batches(),
        ..FakeBroker::default()
    }
}

fn answer(query: &str) -> Answer {
    let broker = broker();
    let access = Access::new(&broker, None);
    records(&access, "orders", Some(query))
}

fn page(query: &str) -> Value {
    match answer(query) {
        Answer::Json(body) => body,
        other => panic!("{query}: {other:?}"),
    }
}

fn offsets(page: &Value) -> Vec<i64> {
    page["records"]
        .as_array()
        .expect("records")
        .iter()
        .map(|record| record["offset"].as_i64().expect("offset"))
        .collect()
}

#[test]
fn the_newest_records_skip_markers_and_point_back() {
    let newest = page("partition=0&limit=3");
    assert_eq!(offsets(&newest), vec![6, 7, 9]);
    assert_eq!(newest["previous_offset"], 6);
    assert_eq!(newest["next_offset"], Value::Null);
    // Paging back reaches the log start, where the cursor ends.
    let older = page("partition=0&limit=3&before=6");
    assert_eq!(offsets(&older), vec![3, 4, 5]);
    assert_eq!(older["next_offset"], 6, "newer records follow");
    let oldest = page("partition=0&limit=3&before=3");
    assert_eq!(offsets(&oldest), vec![2]);
    assert_eq!(oldest["previous_offset"], Value::Null);
}

#[test]
fn forward_pages_continue_where_they_stopped() {
    let first = page("partition=0&offset=2&limit=3");
    assert_eq!(offsets(&first), vec![2, 3, 4]);
    assert_eq!(first["next_offset"], 5);
    assert_eq!(
        first["previous_offset"],
        Value::Null,
        "it starts at the log start"
    );
    let second = page("partition=0&offset=5&limit=3");
    assert_eq!(offsets(&second), vec![5, 6, 7]);
    assert_eq!(second["previous_offset"], 5);
    let last = page("partition=0&offset=8&limit=3");
    assert_eq!(offsets(&last), vec![9]);
    assert_eq!(last["next_offset"], Value::Null);
    // An offset inside a batch starts at that record.
    assert_eq!(offsets(&page("partition=0&offset=3&limit=1")), vec![3]);
}

#[test]
fn a_timestamp_lands_on_the_first_record_at_or_after_it() {
    assert_eq!(
        offsets(&page("partition=0&timestamp=4500&limit=2")),
        vec![5, 6]
    );
    assert_eq!(offsets(&page("partition=0&timestamp=0&limit=1")), vec![2]);
    let after_all = page("partition=0&timestamp=99999");
    assert_eq!(offsets(&after_all), Vec::<i64>::new());
}

#[test]
fn a_filter_matches_keys_or_values() {
    assert_eq!(offsets(&page("partition=0&filter=value-7")), vec![7]);
    assert_eq!(offsets(&page("partition=0&filter=key-3")), vec![3]);
    assert_eq!(
        offsets(&page("partition=0&filter=%22items%22")),
        vec![2],
        "percent-encoded text"
    );
    assert_eq!(
        offsets(&page("partition=0&offset=2&filter=value&limit=2")),
        vec![4, 5]
    );
    assert_eq!(
        offsets(&page("partition=0&filter=nothing")),
        Vec::<i64>::new()
    );
}

#[test]
fn values_come_as_text_and_base64_with_headers() {
    let first = page("partition=0&offset=2&limit=2");
    let json_value = &first["records"][0]["value"];
    assert_eq!(json_value["utf8"], true);
    assert_eq!(json_value["text"], r#"{"id":2,"items":[1,2]}"#);
    let binary = &first["records"][1]["value"];
    assert_eq!(binary["utf8"], false);
    assert_eq!(binary["text"], "0xff00");
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(binary["base64"].as_str().expect("base64"))
        .expect("valid base64");
    assert_eq!(decoded, vec![0xff, 0x00]);
    assert_eq!(first["records"][0]["timestamp_ms"], 2000);
    let with_header = page("partition=0&offset=5&limit=1");
    assert_eq!(with_header["records"][0]["headers"][0]["key"], "trace");
    assert_eq!(
        with_header["records"][0]["headers"][0]["value"]["text"],
        "abc"
    );
    // A small max_bytes cuts, and says so.
    let cut = page("partition=0&offset=2&limit=1&max_bytes=4");
    assert_eq!(cut["records"][0]["value"]["text"], r#"{"id"#);
    assert_eq!(cut["records"][0]["value"]["truncated"], true);
    assert_eq!(cut["records"][0]["value"]["size"], 22);
}

#[test]
fn shown_bytes_cut_text_at_a_character_boundary() {
    assert_eq!(shown_bytes(None, 10), Value::Null);
    let text = "aé".as_bytes();
    let shown = shown_bytes(Some(text), 2);
    assert_eq!(shown["text"], "a");
    assert_eq!(shown["truncated"], true);
    assert_eq!(shown["utf8"], true);
}

#[test]
fn every_partition_merges_by_timestamp() {
    let all = page("partition=all&limit=2");
    assert_eq!(offsets(&all), vec![7, 9]);
    assert_eq!(all["partition"], "all");
    assert!(matches!(
        answer("partition=all&offset=2"),
        Answer::BadRequest(_)
    ));
}

#[test]
fn malformed_queries_are_refused_with_the_reason() {
    for query in [
        "limit=0",
        "limit=101",
        "limit=ten",
        "partition=-1",
        "partition=x",
        "partition=7",
        "offset=1",
        "offset=11",
        "offset=2&before=5",
        "timestamp=-5",
        "filter=%zz",
        "max_bytes=0",
        "max_bytes=1000000",
    ] {
        match answer(query) {
            Answer::BadRequest(problem) => assert!(!problem.is_empty(), "{query}"),
            other => panic!("{query}: {other:?}"),
        }
    }
    // Partition 1 exists but another broker leads it.
    assert!(
        matches!(answer("partition=1"), Answer::BadRequest(problem) if problem.contains("not led"))
    );
    let broker = broker();
    let access = Access::new(&broker, None);
    assert_eq!(records(&access, "nope", None), Answer::NotFound);
}

#[test]
fn raw_serves_a_whole_key_or_value() {
    let broker = broker();
    let access = Access::new(&broker, None);
    let raw_of = |query: &str| raw(&access, "orders", Some(query));
    match raw_of("partition=0&offset=3") {
        Answer::Raw {
            body,
            text,
            filename,
        } => {
            assert_eq!(&body[..], &[0xff, 0x00]);
            assert!(!text);
            assert_eq!(filename, "orders-0-3.value");
        }
        other => panic!("{other:?}"),
    }
    match raw_of("partition=0&offset=4&part=key&view=text") {
        Answer::Raw { body, text, .. } => {
            assert_eq!(&body[..], b"key-4");
            assert!(text);
        }
        other => panic!("{other:?}"),
    }
    // The marker, below the log start, at the high watermark.
    for missing in [
        "partition=0&offset=8",
        "partition=0&offset=1",
        "partition=0&offset=10",
    ] {
        assert_eq!(raw_of(missing), Answer::NotFound, "{missing}");
    }
    for bad in [
        "partition=0",
        "offset=2",
        "partition=0&offset=2&part=both",
        "partition=a&offset=2",
    ] {
        assert!(matches!(raw_of(bad), Answer::BadRequest(_)), "{bad}");
    }
}

#[test]
fn records_need_read_on_the_topic() {
    let broker = broker();
    let viewer = Viewer {
        user: "alice".to_owned(),
        host: IpAddr::V4(Ipv4Addr::LOCALHOST),
    };
    let access = Access::new(&broker, Some(&viewer));
    assert_eq!(records(&access, "orders", None), Answer::Forbidden);
    assert_eq!(
        raw(&access, "orders", Some("partition=0&offset=2")),
        Answer::Forbidden
    );
}
