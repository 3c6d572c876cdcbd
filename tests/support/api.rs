//! Helpers of the tests that talk to an API server through kube
//! (tests/apiserver.rs, tests/apiserver_watch.rs).

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use serde_json::Value;

pub fn api_error(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

pub fn machinesets(client: &kube::Client) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("machine.openshift.io", "v1beta1", "MachineSet"),
        "machinesets",
    );
    Api::namespaced_with(client.clone(), "openshift-machine-api", &ar)
}

pub fn names<T: kube::Resource>(items: &[T]) -> Vec<String> {
    items.iter().map(|o| o.meta().name.clone().unwrap()).collect()
}

pub fn rv(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap()
}
