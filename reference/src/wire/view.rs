//! The management answers (PROTOCOL.md section 17), typed by what they show.
//!
//! Every engine answers a management request with a [`View`], so code between the engine
//! and the wire reads a view as its type rather than as JSON. The route table names each
//! route's view by its [`ViewKind`]; the list below is the one place a kind is tied to
//! its wire type, for reading a view back from JSON, writing it, and describing it in
//! the OpenAPI document.

use super::*;
use serde_json::Value;

/// Declares [`View`], [`ViewKind`] and the code that goes from one to the other, from
/// one list of `Kind(WireType)` pairs.
macro_rules! views {
    ($($kind:ident($ty:ty)),* $(,)?) => {
        /// A management answer, by what it shows.
        #[derive(Clone, Debug, PartialEq)]
        #[allow(missing_docs)] // Each variant is named for the wire type it holds.
        pub enum View {
            $($kind($ty)),*
        }

        /// Which view a route answers with: a [`View`] variant without its contents.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[allow(missing_docs)]
        pub enum ViewKind {
            $($kind),*
        }

        impl View {
            /// The view of kind `kind` read from its JSON form.
            pub fn read(kind: ViewKind, v: Value) -> Result<View, serde_json::Error> {
                match kind {
                    $(ViewKind::$kind => serde_json::from_value(v).map(View::$kind)),*
                }
            }
        }

        impl serde::Serialize for View {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self {
                    $(View::$kind(v) => v.serialize(s)),*
                }
            }
        }

        #[cfg(feature = "openapi")]
        impl ViewKind {
            /// The JSON Schema of this kind's wire type, a reference into `g`'s definitions.
            pub fn schema(self, g: &mut schemars::SchemaGenerator) -> Value {
                match self {
                    $(ViewKind::$kind => g.subschema_for::<$ty>().to_value()),*
                }
            }
        }
    };
}

views! {
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
