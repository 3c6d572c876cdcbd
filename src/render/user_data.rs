//! The `windows-user-data` Secret's script: what a new Windows Machine runs
//! on first boot so that winfleet can reach it (WMCO-SPEC 6; WMCO's
//! `pkg/secrets` does the same job, this is winfleet's own script, written
//! from its behaviour, see docs/lifecycle.md "Machines").
//!
//! The script installs and starts OpenSSH Server (ten tries at most,
//! five seconds apart: a try that fails and one that succeeds without
//! registering the service count alike, issue 35 item 8), opens the kubelet's,
//! windows_exporter's and sshd's ports, turns public-key authentication on
//! and password authentication off (whatever the line looked like before,
//! commented or not), and authorizes the fleet's public key for the
//! administrators. It holds the public key only, base64-encoded as one
//! string literal (the house rule for values in scripts); the private key
//! never reaches it. Pure: no IO.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

pub use crate::vocab::platform::Platform;

/// The Secret's name (WMCO's).
pub const SECRET_NAME: &str = "windows-user-data";
/// The Secret's data key (WMCO's).
pub const SECRET_KEY: &str = "userData";
/// The Secret annotation naming the fingerprint of the key it authorizes
/// (plans and status name the key by it, never by the script).
pub const FINGERPRINT_ANNOTATION: &str = "winfleet.io/authorized-key-fingerprint";

/// Why a key cannot be put in user data.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UserDataError {
    /// Not `<type> <base64>` with a known key type.
    #[error("the fleet's public key is not an authorized_keys line of a known key type ({0})")]
    NotAPublicKey(String),
}

const KEY_TYPES: &[&str] =
    &["ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521"];

/// The user data authorizing `public_key` (`<type> <base64>`, the form
/// `Pool::public_key_line` gives), as `platform` reads it: GCP runs a bare
/// PowerShell script (its `windows-startup-script-ps1`), every other cloud
/// reads `<powershell>` and `<persist>` tags (as WMCO's `pkg/secrets`
/// wraps it). On AWS the script also makes the instance metadata route
/// persistent ([`AWS_ROUTES`]).
pub fn render(public_key: &str, platform: Platform) -> Result<String, UserDataError> {
    let line = authorized_line(public_key)?;
    let mut script = SCRIPT.replace("{KEY}", &STANDARD.encode(line.as_bytes()));
    if platform == Platform::Aws {
        script.push_str(AWS_ROUTES);
    }
    Ok(match platform {
        Platform::Gcp => script,
        _ => format!("<powershell>\n{script}</powershell>\n<persist>true</persist>\n"),
    })
}

/// The key checked and reduced to `<type> <base64>` (a comment dropped).
pub fn authorized_line(public_key: &str) -> Result<String, UserDataError> {
    let mut parts = public_key.split_whitespace();
    let (Some(kind), Some(body)) = (parts.next(), parts.next()) else {
        return Err(UserDataError::NotAPublicKey("expected '<type> <base64>'".into()));
    };
    if !KEY_TYPES.contains(&kind) {
        return Err(UserDataError::NotAPublicKey(format!("unknown key type {kind:?}")));
    }
    if STANDARD.decode(body).is_err() {
        return Err(UserDataError::NotAPublicKey("the key body is not base64".into()));
    }
    Ok(format!("{kind} {body}"))
}

// `{KEY}` is the only substitution: the authorized_keys line, base64.
const SCRIPT: &str = r#"# winfleet user data: OpenSSH Server with the fleet's public key only.
# The administrator account: capi on Azure, Administrator elsewhere (enabled
# with a random password nobody uses: password authentication is turned off).
if ($null -eq (Get-LocalUser | Where-Object { $_.Name -eq 'capi' })) {
    $account = Get-LocalUser -Name 'Administrator' -ErrorAction SilentlyContinue
    if (($null -ne $account) -and (-not $account.Enabled)) {
        Add-Type -AssemblyName 'System.Web'
        $password = ConvertTo-SecureString ([System.Web.Security.Membership]::GeneratePassword(24, 4)) -AsPlainText -Force
        $account | Set-LocalUser -Password $password
        $account | Enable-LocalUser
    }
}
# OpenSSH Server; the capability needs the network, which may come late.
# Ten tries at most, five seconds apart, whether a try fails or succeeds
# without registering the service.
$attempt = 0
while (($null -eq (Get-Service -Name sshd -ErrorAction SilentlyContinue)) -and ($attempt -lt 10)) {
    $attempt++
    try {
        Add-WindowsCapability -Online -Name 'OpenSSH.Server~~~~0.0.1.0' -ErrorAction Stop | Out-Null
    } catch {
        Write-Output ('OpenSSH Server, try ' + $attempt + ': ' + $_.Exception.Message)
    }
    Start-Sleep -Seconds 5
}
# The kubelet's logs port, windows_exporter's port, and sshd's.
foreach ($rule in @(@('ContainerLogsPort', 10250), @('WindowsExporter', 9182), @('OpenSSH-Server-In-TCP', 22))) {
    if (-not (Get-NetFirewallRule -Name $rule[0] -ErrorAction SilentlyContinue)) {
        New-NetFirewallRule -Name $rule[0] -DisplayName $rule[0] -Direction Inbound -Action Allow -Protocol TCP -LocalPort $rule[1] -EdgeTraversalPolicy Allow | Out-Null
    }
    Set-NetFirewallRule -Name $rule[0] -Enabled True -Profile Any
}
Set-Service -Name sshd -StartupType Automatic
Start-Service sshd
# Public keys only: whatever the lines were (commented or not), and added
# when absent.
$config = "$env:ProgramData\ssh\sshd_config"
$lines = @(Get-Content -Path $config | Where-Object { $_ -notmatch '^\s*#?\s*(PubkeyAuthentication|PasswordAuthentication)\s' })
$lines = @('PubkeyAuthentication yes', 'PasswordAuthentication no') + $lines
Set-Content -Path $config -Value $lines -Encoding ascii
# The fleet's public key, for the administrators, readable by them and SYSTEM only.
$authorizedKey = [System.Text.Encoding]::ASCII.GetString([System.Convert]::FromBase64String('{KEY}'))
$keysPath = "$env:ProgramData\ssh\administrators_authorized_keys"
Set-Content -Path $keysPath -Value $authorizedKey -Encoding ascii
$acl = Get-Acl -Path $keysPath
$acl.SetAccessRuleProtection($true, $false)
foreach ($who in @('Administrators', 'SYSTEM')) {
    $acl.SetAccessRule((New-Object System.Security.AccessControl.FileSystemAccessRule($who, 'FullControl', 'Allow')))
}
$acl | Set-Acl -Path $keysPath
Restart-Service sshd
"#;

/// AWS only: the routes to the instance metadata service (169.254.169.254)
/// made persistent by EC2Launch v2's `add-routes` task, as WMCO's user data
/// does (its `pkg/secrets`, EC2Launch v2 2.0.2107 or later). Without them a
/// Windows node on AWS does not return to Ready after a graceful reboot
/// (the routes and the HNS networks disagree; OpenShift's "Windows
/// container workloads" known issues), so a safe reboot rollout would stop
/// with a cordoned node. An EC2Launch missing or older is installed from
/// Amazon's published MSI first, as WMCO does.
pub const AWS_ROUTES: &str = r#"# AWS: the instance metadata routes, persistent across reboots (EC2Launch v2).
$ec2Launch = "$env:ProgramFiles\Amazon\EC2Launch\EC2Launch.exe"
$ec2LaunchVersion = $null
if (Test-Path -LiteralPath $ec2Launch -PathType Leaf) {
    $reported = [string](& $ec2Launch version 2>$null | Select-Object -First 1)
    $parsed = $null
    if ([System.Version]::TryParse($reported.Trim(), [ref]$parsed)) { $ec2LaunchVersion = $parsed }
}
if (($null -eq $ec2LaunchVersion) -or ($ec2LaunchVersion -lt [System.Version]'2.0.2107')) {
    $msi = Join-Path -Path $env:TEMP -ChildPath 'AmazonEC2Launch.msi'
    Invoke-WebRequest -Uri 'https://s3.amazonaws.com/amazon-ec2launch-v2/windows/amd64/latest/AmazonEC2Launch.msi' -OutFile $msi -UseBasicParsing
    Start-Process -FilePath 'msiexec.exe' -ArgumentList @('/i', $msi, '/qn') -Wait
}
& $ec2Launch run-task add-routes --persistent
"#;

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";

    #[test]
    fn the_key_travels_base64_encoded_and_its_comment_is_dropped() {
        let script = render(&format!("{KEY} someone@host"), Platform::None).unwrap();
        assert!(!script.contains("AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0"), "the key in clear");
        assert!(script.contains(&STANDARD.encode(KEY)));
        assert!(script.starts_with("<powershell>\n") && script.ends_with("<persist>true</persist>\n"));
    }

    #[test]
    fn gcp_gets_the_bare_script() {
        let script = render(KEY, Platform::Gcp).unwrap();
        assert!(script.starts_with("# winfleet user data"));
        assert!(!script.contains("add-routes"));
    }

    #[test]
    fn aws_alone_makes_the_metadata_route_persistent_inside_the_tags() {
        let aws = render(KEY, Platform::Aws).unwrap();
        let routes = aws.find("run-task add-routes --persistent").expect("the AWS route task");
        assert!(routes < aws.find("</powershell>").unwrap(), "the route task runs inside the script");
        for other in [Platform::Azure, Platform::Gcp, Platform::VSphere, Platform::Nutanix, Platform::None] {
            assert!(!render(KEY, other).unwrap().contains("add-routes"), "{other}");
        }
        for tagged in [Platform::Aws, Platform::Azure, Platform::VSphere, Platform::Nutanix, Platform::None] {
            let script = render(KEY, tagged).unwrap();
            assert!(script.starts_with("<powershell>\n") && script.ends_with("<persist>true</persist>\n"), "{tagged}");
        }
    }

    #[test]
    fn what_is_not_a_public_key_is_refused() {
        for bad in ["", "ssh-ed25519", "ssh-dss AAAA", "ssh-ed25519 not*base64", "-----BEGIN OPENSSH PRIVATE KEY-----"]
        {
            assert!(render(bad, Platform::None).is_err(), "{bad:?}");
        }
    }
}
