//! The management answers (PROTOCOL.md section 17), typed by route.
//!
//! Every engine answers a management request with one of these, so code between the
//! engine and the wire reads a view as its type rather than as JSON, and the one place
//! that knows which type a route answers with is [`View::from_value`], which the model's
//! renderer uses to type the views it builds from symbolic values.

use super::*;
use serde_json::Value;

/// A management answer, by what it shows.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs)] // Each variant is named for the wire type it holds.
pub enum View {
    Overview(Overview),
    Status(StatusView),
    Queues(QueuesPage),
    Queue(QueueDetail),
    StatusQueue(StatusQueue),
    Depth(Depth),
    Partitions(PartitionsPage),
    Namespaces(Namespaces),
    Tasks(Tasks),
    Groups(GroupsPage),
    Lagging(Lagging),
    Group(GroupView),
    Messages(MessagesPage),
    Analytics(Analytics),
    Message(MessageDetail),
    Seek(SeekResponse),
    Subscription(SubscriptionResponse),
    Retry(RetryResponse),
    MessageDeleted(MessageDeleted),
    GroupDeleted(GroupDeleted),
    Metrics(MetricsView),
}

impl View {
    /// The view `route` answers with, read from its JSON form; an error when `route` is
    /// not a management route or `v` is not that route's view.
    pub fn from_value(route: RouteId, v: Value) -> Result<View, String> {
        use serde_json::from_value as of;
        use RouteId as R;
        let typed = match route {
            R::Overview => of(v).map(View::Overview),
            R::Status => of(v).map(View::Status),
            R::Queues | R::StatusQueues => of(v).map(View::Queues),
            R::Queue => of(v).map(View::Queue),
            R::StatusQueue => of(v).map(View::StatusQueue),
            R::Depth => of(v).map(View::Depth),
            R::Partitions => of(v).map(View::Partitions),
            R::Namespaces => of(v).map(View::Namespaces),
            R::Tasks => of(v).map(View::Tasks),
            R::Groups => of(v).map(View::Groups),
            R::Lagging => of(v).map(View::Lagging),
            R::Group => of(v).map(View::Group),
            R::Messages | R::QueueMessages => of(v).map(View::Messages),
            R::Analytics => of(v).map(View::Analytics),
            R::Message => of(v).map(View::Message),
            R::Seek | R::SeekPartition => of(v).map(View::Seek),
            R::Subscription => of(v).map(View::Subscription),
            R::Retry => of(v).map(View::Retry),
            R::DeleteMessage => of(v).map(View::MessageDeleted),
            R::DeleteGroup | R::DeleteGroupQueue => of(v).map(View::GroupDeleted),
            other => return Err(format!("{other:?} answers no management view")),
        };
        typed.map_err(|e| format!("not the view of {route:?}: {e}"))
    }
}

impl serde::Serialize for View {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            View::Overview(v) => v.serialize(s),
            View::Status(v) => v.serialize(s),
            View::Queues(v) => v.serialize(s),
            View::Queue(v) => v.serialize(s),
            View::StatusQueue(v) => v.serialize(s),
            View::Depth(v) => v.serialize(s),
            View::Partitions(v) => v.serialize(s),
            View::Namespaces(v) => v.serialize(s),
            View::Tasks(v) => v.serialize(s),
            View::Groups(v) => v.serialize(s),
            View::Lagging(v) => v.serialize(s),
            View::Group(v) => v.serialize(s),
            View::Messages(v) => v.serialize(s),
            View::Analytics(v) => v.serialize(s),
            View::Message(v) => v.serialize(s),
            View::Seek(v) => v.serialize(s),
            View::Subscription(v) => v.serialize(s),
            View::Retry(v) => v.serialize(s),
            View::MessageDeleted(v) => v.serialize(s),
            View::GroupDeleted(v) => v.serialize(s),
            View::Metrics(v) => v.serialize(s),
        }
    }
}
