import { describe, expect, it } from 'vitest';
import { isOwnPage } from '../../../main/host/electron/sender-check.js';

describe('Electron IPC sender check', () => {
  const page = '/opt/factory/resources/app/dist/renderer/index.html';
  it('accepts only our own file:// page', () => {
    expect(isOwnPage('file:///opt/factory/resources/app/dist/renderer/index.html', page)).toBe(true);
    expect(isOwnPage('file:///opt/factory/resources/app/dist/renderer/index.html?x=1#tab', page)).toBe(true);
  });
  it('refuses other pages, other schemes, hosts and tricks', () => {
    for (const url of [
      undefined,
      '',
      'not a url',
      'https://example.com/index.html',
      'http://127.0.0.1:1234/index.html',
      'file:///opt/factory/resources/app/dist/renderer/other.html',
      'file:///tmp/index.html',
      'file://evil-host/opt/factory/resources/app/dist/renderer/index.html',
      'file:///opt/factory/resources/app/dist/renderer/../renderer2/index.html',
      'devtools://devtools/bundled/index.html',
      // Same file after normalising, but not a URL our page loads from.
      'file:///opt/factory/resources/app/dist/renderer/index.html/',
      'file:///opt/factory/resources/app/dist//renderer/index.html',
    ]) {
      expect(isOwnPage(url, page), String(url)).toBe(false);
    }
  });
});
