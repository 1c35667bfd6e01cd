// What the leak check accepts from QEMU before it reads guest memory straight
// from QEMU's process: anything not exactly as expected means the dump instead.
import { describe, expect, it } from 'vitest';
import { guestWritableBesidesRam, mappedWhole, parseGpa2hva, parseRamBlocks } from '../../../main/credentials/guest-ram.js';
import { needlesFor } from '../../../main/credentials/leak-needles.js';
import { bufferReader, scanReader } from '../../../main/credentials/leak-scan.js';

// `info ramblock` of a sandbox, as QEMU 7.2 prints it.
const RAMBLOCKS = `              Block Name    PSize              Offset               Used              Total
                    ram0    4 KiB  0x0000000000000000 0x0000000040000000 0x0000000040000000
    /rom@etc/acpi/tables    4 KiB  0x00000000400c0000 0x0000000000020000 0x0000000000200000
                 pc.bios    4 KiB  0x0000000040000000 0x0000000000040000 0x0000000000040000
0000:00:02.0/virtio-net-pci.rom    4 KiB  0x0000000040080000 0x0000000000040000 0x0000000000040000
                  pc.rom    4 KiB  0x0000000040040000 0x0000000000020000 0x0000000000020000
   /rom@etc/table-loader    4 KiB  0x00000000402c0000 0x0000000000001000 0x0000000000010000
      /rom@etc/acpi/rsdp    4 KiB  0x0000000040300000 0x0000000000001000 0x0000000000001000
`;

describe('reading guest memory from QEMU’s process', () => {
  it('takes ram0 and its size from QEMU’s RAM block list, where the rest are ROMs', () => {
    const blocks = parseRamBlocks(RAMBLOCKS)!;
    expect(blocks.find((b) => b.name === 'ram0')).toEqual({ name: 'ram0', usedBytes: 1024 * 1024 * 1024 });
    expect(blocks).toHaveLength(7);
    expect(guestWritableBesidesRam(blocks)).toEqual([]);
  });

  it('refuses a VM with memory the guest can write besides ram0 (a framebuffer, shared memory)', () => {
    const more = `${RAMBLOCKS}                vga.vram    4 KiB  0x0000000040400000 0x0000000001000000 0x0000000001000000\n             ivshmem-mem    2 MiB  0x0000000041400000 0x0000000000200000 0x0000000000200000\n`;
    expect(guestWritableBesidesRam(parseRamBlocks(more)!)).toEqual(['vga.vram', 'ivshmem-mem']);
  });

  it('refuses a list in any other form than the one it knows', () => {
    expect(parseRamBlocks(`${RAMBLOCKS}ram1 4 KiB 0x0 0x1000\n`)).toBeNull();
    expect(parseRamBlocks('ram0 4 KiB 0x0 0x40000000 0x40000000 extra\n')).toBeNull();
    expect(parseRamBlocks("unknown command: 'info ramblock'\n")).toBeNull();
  });

  it('takes only ram0’s address from gpa2hva, and only one a pointer can hold', () => {
    expect(parseGpa2hva('Host virtual address for 0x0 (ram0) is 0x7fac43e00000\r\n')).toBe(0x7fac43e00000);
    expect(parseGpa2hva('Host virtual address for 0x0 (pc.bios) is 0x7fac43e00000')).toBeNull();
    expect(parseGpa2hva('Host virtual address for 0x0 (ram0) is 0xffffffffffffffff')).toBeNull();
    expect(parseGpa2hva('No memory is mapped at address 0x0')).toBeNull();
    expect(parseGpa2hva('Host virtual address for 0x0 (ram0) is 0x7fac43e00000\nHost virtual address for 0x0 (ram0) is 0x1')).toBeNull();
  });

  it('reads only a range one mapping of the process holds whole', () => {
    const maps = '7fac43e00000-7fac83e00000 rw-p 00000000 00:00 0 \n7fac83e00000-7fac83e01000 ---p 00000000 00:00 0 \n';
    expect(mappedWhole(maps, 0x7fac43e00000, 0x40000000)).toBe(true);
    expect(mappedWhole(maps, 0x7fac43e00000, 0x40001000)).toBe(false); // runs into the guard page's mapping
    expect(mappedWhole(maps, 0x7fac43dff000, 0x1000)).toBe(false);
    expect(mappedWhole('', 0x7fac43e00000, 1)).toBe(false);
  });

  it('looks for a value split across two of ram0’s pages at their edges, as in a dump', async () => {
    const value = 'sk-ant-api03-pagesplit-0123456789abcdef';
    const ram = Buffer.alloc(4 * 4096, 0x2e);
    ram.write(value.slice(0, 15), 4096 - 15); // the end of page 0 …
    ram.write(value.slice(15), 3 * 4096); // … and the start of page 3
    const r = await scanReader(bufferReader(ram), needlesFor('k', value), {}, { pageMap: { segments: [{ offset: 0, size: ram.length, paddr: 0 }] } });
    expect(r.hits.map((h) => h.encoding)).toContain('raw+page-split');
  });
});
