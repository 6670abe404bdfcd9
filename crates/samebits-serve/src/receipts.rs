//! The receipts of recent responses, kept for `GET /v1/receipts/{id}`: the newest `capacity` of
//! them, the oldest dropped first, so that memory stays bounded however long the server runs.

use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct Kept {
    by_id: HashMap<String, Arc<Value>>,
    order: VecDeque<String>,
}

/// Receipts by response id.
pub struct ReceiptStore {
    capacity: usize,
    kept: Mutex<Kept>,
}

impl ReceiptStore {
    pub fn new(capacity: usize) -> ReceiptStore {
        ReceiptStore {
            capacity,
            kept: Mutex::new(Kept::default()),
        }
    }

    pub fn insert(&self, id: &str, receipt: Value) {
        if self.capacity == 0 {
            return;
        }
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if kept.by_id.insert(id.into(), Arc::new(receipt)).is_none() {
            kept.order.push_back(id.into());
        }
        while kept.order.len() > self.capacity {
            if let Some(oldest) = kept.order.pop_front() {
                kept.by_id.remove(&oldest);
            }
        }
    }

    pub fn get(&self, id: &str) -> Option<Arc<Value>> {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.by_id.get(id).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_oldest_receipt_goes_first() {
        let store = ReceiptStore::new(2);
        for i in 0..3 {
            store.insert(&format!("r{i}"), json!(i));
        }
        assert!(store.get("r0").is_none());
        assert_eq!(*store.get("r1").unwrap(), json!(1));
        assert_eq!(*store.get("r2").unwrap(), json!(2));
    }
}
