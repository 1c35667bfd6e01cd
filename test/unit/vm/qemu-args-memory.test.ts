// The guest RAM options of the QEMU command line: always the named backend
// ram0 (so a memory state saved by one kind of VM restores into another), a
// snapshot template's file mapped shared, a clone's mapped private.
import { describe, expect, it } from 'vitest';
import { buildQemuArgs, GUEST_RAM_ID } from '../../../main/vm/qemu-args.js';
import { launchSpec } from './launch-spec.js';

const base = launchSpec();

function option(args: string[], flag: string): string[] {
  return args.flatMap((a, i) => (a === flag ? [args[i + 1]!] : []));
}

describe('guest memory on the QEMU command line', () => {
  it('is anonymous RAM in the named backend by default, of the size asked for', () => {
    const args = buildQemuArgs(base);
    expect(option(args, '-machine')).toEqual([`pc,memory-backend=${GUEST_RAM_ID}`]);
    expect(option(args, '-object')).toEqual([`memory-backend-ram,id=${GUEST_RAM_ID},size=2048M`]);
    expect(option(args, '-m')).toEqual(['2048']);
  });

  it("maps a template's file shared and a clone's private, so a clone's writes never reach the file", () => {
    const shared = buildQemuArgs({ ...base, memory: { kind: 'file', path: '/snap/t/ram', shared: true } });
    expect(option(shared, '-object')).toEqual([`memory-backend-file,id=${GUEST_RAM_ID},size=2048M,mem-path=/snap/t/ram,share=on`]);
    const clone = buildQemuArgs({ ...base, memory: { kind: 'file', path: '/snap/t/ram', shared: false } });
    expect(option(clone, '-object')).toEqual([`memory-backend-file,id=${GUEST_RAM_ID},size=2048M,mem-path=/snap/t/ram,share=off`]);
  });

  it('keeps a comma in the file path from adding options (share=on smuggled in a folder name)', () => {
    const args = buildQemuArgs({ ...base, memory: { kind: 'file', path: '/snap/x,share=on/ram', shared: false } });
    const object = option(args, '-object')[0]!;
    expect(object).toBe(`memory-backend-file,id=${GUEST_RAM_ID},size=2048M,mem-path=/snap/x,,share=on/ram,share=off`);
    // Split as QEMU does (",," is a literal comma): exactly one share option, and it is off.
    const parts = object.replace(/,,/g, '\0').split(',');
    expect(parts.filter((p) => p.startsWith('share='))).toEqual(['share=off']);
  });

  it('refuses a relative memory file and a size that is not a whole number of MiB in range', () => {
    expect(() => buildQemuArgs({ ...base, memory: { kind: 'file', path: 'ram', shared: false } })).toThrow(/not an absolute path/);
    expect(() => buildQemuArgs({ ...base, memoryMb: 1.5 })).toThrow(/bad guest memory size/);
    expect(() => buildQemuArgs({ ...base, memoryMb: 0 })).toThrow(/bad guest memory size/);
    expect(() => buildQemuArgs({ ...base, memoryMb: Number.NaN })).toThrow(/bad guest memory size/);
  });
});
