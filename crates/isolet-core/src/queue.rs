//! The engine's admission queue: FIFO, bounded, with removal of a waiting entry
//! (abort while queued). Generic so the scheduling rules are testable without V8.
use std::collections::VecDeque;

/// Returned when the queue is at capacity; carries the rejected item back.
#[derive(Debug, PartialEq, Eq)]
pub struct QueueFull<T>(pub T);

#[derive(Debug)]
pub struct AdmissionQueue<T> {
    items: VecDeque<(u64, T)>,
    capacity: usize,
}

impl<T> AdmissionQueue<T> {
    pub fn new(capacity: usize) -> Self {
        AdmissionQueue { items: VecDeque::new(), capacity }
    }

    /// Appends `item` under `id`, or gives it back when the queue is full.
    pub fn push(&mut self, id: u64, item: T) -> Result<(), QueueFull<T>> {
        if self.items.len() >= self.capacity {
            return Err(QueueFull(item));
        }
        self.items.push_back((id, item));
        Ok(())
    }

    /// The oldest waiting item.
    pub fn pop(&mut self) -> Option<(u64, T)> {
        self.items.pop_front()
    }

    /// Takes a waiting item out of line (it was aborted before it started).
    pub fn remove(&mut self, id: u64) -> Option<T> {
        let pos = self.items.iter().position(|(i, _)| *i == id)?;
        self.items.remove(pos).map(|(_, t)| t)
    }

    /// Empties the queue (shutdown), oldest first.
    pub fn drain(&mut self) -> Vec<(u64, T)> {
        self.items.drain(..).collect()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_order_and_capacity() {
        let mut q = AdmissionQueue::new(2);
        q.push(1, "a").unwrap();
        q.push(2, "b").unwrap();
        assert_eq!(q.push(3, "c"), Err(QueueFull("c")));
        assert_eq!(q.pop(), Some((1, "a")));
        q.push(3, "c").unwrap();
        assert_eq!(q.drain(), vec![(2, "b"), (3, "c")]);
        assert!(q.is_empty());
    }

    #[test]
    fn removes_a_waiting_entry_by_id() {
        let mut q = AdmissionQueue::new(3);
        for (i, s) in [(1, "a"), (2, "b"), (3, "c")] {
            q.push(i, s).unwrap();
        }
        assert_eq!(q.remove(2), Some("b"));
        assert_eq!(q.remove(2), None);
        assert_eq!(q.len(), 2);
        assert_eq!(q.pop(), Some((1, "a")));
    }

    #[test]
    fn zero_capacity_refuses_everything() {
        let mut q: AdmissionQueue<u8> = AdmissionQueue::new(0);
        assert_eq!(q.push(1, 9), Err(QueueFull(9)));
    }
}
