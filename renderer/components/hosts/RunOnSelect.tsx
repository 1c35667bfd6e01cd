// The new-task form's "Run on": this machine, a sandbox host (with its state and
// load), or any (least loaded); shown only when sandbox hosts exist.
import { hostState, useSandboxHosts } from './use-hosts.js';

export function RunOnSelect({ value, onChange }: { value: string; onChange(v: string): void }) {
  const { hosts } = useSandboxHosts(10_000);
  if (!hosts?.length) return null;
  return (
    <label>
      Run on
      <select data-testid="run-on-select" value={value} onChange={(e) => onChange(e.target.value)}>
        <option value="local">This machine</option>
        {hosts.map((h) => (
          <option key={h.name} value={h.name}>
            {h.name} ({hostState(h)}, {h.running}/{h.capacity})
          </option>
        ))}
        <option value="any">Any (least loaded)</option>
      </select>
    </label>
  );
}
