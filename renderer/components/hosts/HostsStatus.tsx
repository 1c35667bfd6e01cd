// The header's word on sandbox hosts: nothing while all answer, a warning
// naming each host whose connection dropped (its tasks show as lost).
import { useSandboxHosts } from './use-hosts.js';

export function HostsStatus() {
  const { hosts } = useSandboxHosts();
  const lost = (hosts ?? []).filter((h) => h.lost);
  if (!lost.length) return null;
  return (
    <span className="pill bad" data-testid="hosts-status" title="The SSH connection to these sandbox hosts dropped; the app reconnects and removes what their sandboxes left there.">
      {lost.length === 1 ? `host ${lost[0]!.name} lost` : `hosts lost: ${lost.map((h) => h.name).join(', ')}`}
    </span>
  );
}
