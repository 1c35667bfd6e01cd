// The card and the task view say where a sandbox runs when it is a sandbox host.
import { describe, expect, it } from 'vitest';
import { sandboxWords } from '../../renderer/components/sandbox-words.js';

describe('where a sandbox runs, in words', () => {
  it('names the sandbox host of a remote sandbox, and nothing for this machine', () => {
    expect(sandboxWords({ status: 'running', host: 'kvm-box' })).toBe('sandbox running on kvm-box');
    expect(sandboxWords({ status: 'lost', host: 'kvm-box' })).toBe('sandbox lost on kvm-box');
    expect(sandboxWords({ status: 'running' })).toBe('sandbox running');
    expect(sandboxWords({ status: 'running', host: 'kvm-box', keptUntil: new Date(2026, 0, 1, 9, 5).toISOString() })).toBe('sandbox on kvm-box kept until 09:05');
  });
});
