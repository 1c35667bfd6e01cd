import { describe, expect, it } from 'vitest';
import { machineKey, templateKey, TEMPLATE_VERSION } from '../../../main/vm/warm-state.js';
import { testMachine } from './launch-spec.js';

const machine = testMachine;

describe('the keys of saved guest memory', () => {
  it('keeps the machine key a user’s warm layers were saved with', () => {
    // The key this machine had when the layers of the last release were saved. If it moves, every
    // warm layer boots cold until it is remade: change it only for a change of the machine itself.
    expect(machineKey(machine, '7.2.22', 'qemu-system-x86_64')).toBe('5cb8ba83d1e9bbe3');
  });

  it('gives the template its own key, which moves with the machine', () => {
    const key = templateKey(machineKey(machine, '7.2.22', 'qemu-system-x86_64'));
    expect(key).toMatch(/^[0-9a-f]{16}$/);
    expect(key).not.toBe(machineKey(machine, '7.2.22', 'qemu-system-x86_64'));
    expect(templateKey(machineKey({ ...machine, memoryMb: 2048 }, '7.2.22', 'qemu-system-x86_64'))).not.toBe(key);
    expect(templateKey(machineKey(machine, '8.0.0', 'qemu-system-x86_64'))).not.toBe(key);
    expect(templateKey(machineKey(machine, '7.2.22', 'qemu-system-x86_64'))).toBe(key);
  });

  it('moves only the template’s key when what the template’s guest runs changes', () => {
    const machineOf = machineKey(machine, '7.2.22', 'qemu-system-x86_64');
    const key = templateKey(machineOf);
    expect(templateKey(machineOf, TEMPLATE_VERSION + 1)).not.toBe(key);
    expect(templateKey(machineOf, TEMPLATE_VERSION)).toBe(key);
  });
});
