// A sandbox host as the form holds it (text as typed) and as the hosts.* API
// takes it; which field a refusal names ("destination: contains a space").
import type { ApiInput } from '../../../common/contract.js';
import type { SandboxHostView } from '../../../common/sandbox-hosts.js';

export interface HostFormDraft {
  name: string;
  destination: string;
  port: string;
  keySource: 'file' | 'agent';
  keyFile: string;
  capacity: string;
  storageDir: string;
  virtType: 'kvm' | 'qemu';
}

export const HOST_FIELDS = ['alias', 'name', 'destination', 'port', 'keySource', 'keyFile', 'capacity', 'storageDir', 'virtType', 'hostKeyFingerprint'] as const;
export type HostField = (typeof HOST_FIELDS)[number];

export const EMPTY_HOST: HostFormDraft = { name: '', destination: '', port: '22', keySource: 'agent', keyFile: '', capacity: '2', storageDir: '/var/lib/factory-in-a-box', virtType: 'kvm' };

export function draftOf(h: SandboxHostView): HostFormDraft {
  return { name: h.name, destination: h.destination, port: String(h.port), keySource: h.keySource, keyFile: h.keyFile ?? '', capacity: String(h.capacity), storageDir: h.storageDir, virtType: h.virtType };
}

/** The API input for a draft, or the field that is not a number yet. */
export function checkInput(d: HostFormDraft): { input: ApiInput<'hosts.check'> } | { field: HostField; problem: string } {
  const whole = (s: string) => (/^\d{1,6}$/.test(s.trim()) ? Number(s.trim()) : undefined);
  const port = whole(d.port);
  if (port === undefined) return { field: 'port', problem: d.port.trim() ? `"${d.port.trim()}" is not a port number` : 'is empty' };
  const capacity = whole(d.capacity);
  if (capacity === undefined) return { field: 'capacity', problem: d.capacity.trim() ? `"${d.capacity.trim()}" is not a whole number` : 'is empty' };
  return {
    input: {
      name: d.name.trim(),
      destination: d.destination.trim(),
      port,
      keySource: d.keySource,
      ...(d.keySource === 'file' ? { keyFile: d.keyFile.trim() } : {}),
      capacity,
      storageDir: d.storageDir.trim(),
      virtType: d.virtType,
    },
  };
}

/** The field a host's refusal names, and the rest of its message. */
export function fieldOfMessage(message: string): { field: HostField; problem: string } | undefined {
  const m = /^([A-Za-z]+): (.*)$/s.exec(message);
  const field = m && (HOST_FIELDS as readonly string[]).includes(m[1]!) ? (m[1] as HostField) : undefined;
  return field ? { field, problem: m![2]! } : undefined;
}

export function gib(bytes: number): string {
  return `${(bytes / 1024 ** 3).toFixed(1)} GiB`;
}
