use super::*;

fn entry(producer_id: i64, first_offset: i64, last_offset: i64, lso: i64) -> AbortedTxnEntry {
    AbortedTxnEntry {
        producer_id,
        first_offset,
        last_offset,
        last_stable_offset: lso,
    }
}

#[test]
fn entries_are_34_big_endian_bytes() {
    let bytes = entry(0x0102, 3, 4, 5).to_bytes();
    let mut expected = vec![0u8, 0];
    for value in [0x0102i64, 3, 4, 5] {
        expected.extend_from_slice(&value.to_be_bytes());
    }
    assert_eq!(bytes.to_vec(), expected);
    let mut unknown = bytes;
    unknown[1] = 1;
    assert_eq!(AbortedTxnEntry::from_bytes(&unknown), None);
}

#[test]
fn appends_survive_reopening_and_truncation_cuts_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("00000000000000000000.txnindex");
    let mut index = TransactionIndex::create(&path).expect("create");
    assert!(!path.exists(), "the file appears with its first entry");
    index.append(entry(1, 0, 5, 6)).expect("append");
    index.append(entry(2, 3, 9, 10)).expect("append");
    index.append(entry(1, 10, 12, 13)).expect("append");
    index.flush().expect("flush");
    let reopened = TransactionIndex::open(&path).expect("open");
    assert_eq!(reopened.entries(), index.entries());
    index.truncate_to(9).expect("truncate");
    assert_eq!(index.entries(), &[entry(1, 0, 5, 6)]);
    assert_eq!(std::fs::metadata(&path).expect("file").len(), 34);
    index
        .append(entry(3, 7, 20, 21))
        .expect("append after truncation");
    let reopened = TransactionIndex::open(&path).expect("open");
    assert_eq!(
        reopened.entries(),
        &[entry(1, 0, 5, 6), entry(3, 7, 20, 21)]
    );
    index.reset().expect("reset");
    assert!(index.is_empty() && !path.exists());
    assert!(TransactionIndex::open(&path).expect("no file").is_empty());
}

#[test]
fn damaged_files_are_corrupt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("00000000000000000000.txnindex");
    let mut bytes = entry(1, 0, 5, 6).to_bytes().to_vec();
    bytes.push(0);
    std::fs::write(&path, &bytes).expect("write");
    assert!(matches!(
        TransactionIndex::open(&path),
        Err(IndexError::Corrupt { .. })
    ));
    bytes.pop();
    bytes[0] = 0x7f;
    std::fs::write(&path, &bytes).expect("write");
    assert!(matches!(
        TransactionIndex::open(&path),
        Err(IndexError::Corrupt { .. })
    ));
}

#[test]
fn collect_follows_kafkas_rule() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("00000000000000000000.txnindex");
    let mut index = TransactionIndex::create(&path).expect("create");
    // Producer 1 aborts [0, 5] while producer 2 is ongoing from 3; producer
    // 2 aborts [3, 9]; producer 3 aborts [20, 25].
    index.append(entry(1, 0, 5, 3)).expect("append");
    index.append(entry(2, 3, 9, 10)).expect("append");
    index.append(entry(3, 20, 25, 26)).expect("append");
    let collect = |start, upper| {
        let mut out = Vec::new();
        let complete = index.collect(start, upper, &mut out);
        (
            out.iter()
                .map(|aborted| aborted.producer_id)
                .collect::<Vec<_>>(),
            complete,
        )
    };
    assert_eq!(collect(0, 4), (vec![1, 2], true));
    assert_eq!(collect(6, 10), (vec![2], true));
    assert_eq!(collect(10, 20), (vec![], true));
    assert_eq!(collect(10, 26), (vec![3], true));
    assert_eq!(collect(10, 30), (vec![3], false));
    assert_eq!(collect(0, 100), (vec![1, 2, 3], false));
}
