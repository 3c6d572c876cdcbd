//! The node side of the safe reboot over SSH: the boot id from the
//! observation script, the reboot from the dialect's reboot command.

use super::{explain, observe, target};
use crate::desired::model::Instance;
use crate::dialect;
use crate::ssh::{Pool, SshError};

/// The node side of a safe reboot (over SSH in production).
pub trait Host: Sync {
    /// The node's current boot id; an error when it does not answer.
    fn boot_id(&self, instance: &Instance) -> impl Future<Output = Result<String, String>> + Send;
    /// Sends the reboot command. A connection dropped by the reboot is not
    /// an error; a refused command is.
    fn reboot(&self, instance: &Instance) -> impl Future<Output = Result<(), String>> + Send;
}

/// Reboots nodes through the round's SSH pool.
pub struct SshHost<'a> {
    /// The pool (its dead connections are replaced on the next use).
    pub pool: &'a Pool,
}

impl Host for SshHost<'_> {
    async fn boot_id(&self, instance: &Instance) -> Result<String, String> {
        let facts = observe(self.pool, None, &target(instance), &instance.spec, None).await?;
        facts.boot_id.ok_or_else(|| "the node reports no boot id".to_owned())
    }

    async fn reboot(&self, instance: &Instance) -> Result<(), String> {
        match self.pool.run(&target(instance), &dialect::reboot(instance.shell), false).await {
            Ok(output) if output.exit_status.is_none_or(|code| code == 0) => Ok(()),
            Ok(output) => Err(explain("the reboot command failed", &output)),
            // Never reached the node: the reboot was not sent.
            Err(e @ SshError::Connect { .. }) => Err(e.to_string()),
            // The node going down takes the connection with it.
            Err(e) if e.is_transient() => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    }
}
