// The soak's leftover check names every temp name the app's writers make (the
// atomic-write `.tmp` files, mkdtemp `<dir>.tmp-XXXXXX` folders, the stores'
// `.tmp-<id>` folders), a temp folder once, and nothing the app keeps on purpose.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isTempName, leftoversIn } from '../../soak/leftovers.js';
import { tempDir } from '../../support/repo.js';

let dir = '';
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

function put(rel: string, content = 'x'): void {
  fs.mkdirSync(path.join(dir, path.dirname(rel)), { recursive: true });
  fs.writeFileSync(path.join(dir, rel), content);
}

describe('the soak leftover check', () => {
  it('names each kind of temp file and folder the app writes, and nothing it keeps', () => {
    dir = tempDir('soak-leftovers-');
    // Kept on purpose: records, their backups, logs and layers.
    put('state/tasks/t1.json');
    put('state/tasks/t1.json.bak');
    put('logs/terminal/t1/s1.json');
    put('logs/template-notes.log');
    put('layers/abc/layer.json');
    // Temp names, one per writer style.
    put('logs/terminal/t1/s2.json.tmp'); // session metadata (the CI finding)
    put('state/tasks/.t2.json.4242.1733100000000.k3j.tmp'); // the state store's atomic writer
    put('settings.json.99.bak.tmp'); // settings backup
    put('layers/.tmp-m1x-0a0b0c/disk.qcow2'); // a layer being committed
    put('snapshots/.tmp-key-12-34/a'); // a snapshot being made
    put('snapshots/.tmp-key-12-34/b');
    fs.mkdirSync(path.join(dir, 'npm/claude-code@2.1.332.tmp-Ab12Cd'), { recursive: true }); // mkdtemp, empty
    put('tmp-upload-1');
    const found = leftoversIn(dir, { appRunning: false }).map((l) => `${l.kind} ${l.what}`).sort();
    expect(found).toEqual(
      [
        'temp layers/.tmp-m1x-0a0b0c/',
        'temp logs/terminal/t1/s2.json.tmp',
        'temp npm/claude-code@2.1.332.tmp-Ab12Cd/',
        'temp settings.json.99.bak.tmp',
        'temp snapshots/.tmp-key-12-34/',
        'temp state/tasks/.t2.json.4242.1733100000000.k3j.tmp',
        'temp tmp-upload-1',
      ].sort(),
    );
  });

  it('tells temp names from names that only contain the letters', () => {
    expect(['a.tmp', '.a.json.1.2.x.tmp', 'd.tmp-XYZ', '.tmp-1', 'tmp-1', 'x.tmp.part'].every(isTempName)).toBe(true);
    expect(['tmp', 'template.json', 'atmp', 'a.tmpl', 'my-tmp-notes', 'tmpfile'].some(isTempName)).toBe(false);
  });
});
