// What `npm start`'s launcher decides from its arguments and environment (src-main/shell/launch-options.ts).
import { describe, expect, it } from 'vitest';
import { browserOpener, launchOptions } from '../../src-main/shell/launch-options.js';

describe('npm start: the demo switch', () => {
  it('on by default: the app or serve gets --demo after the user arguments', () => {
    expect(launchOptions(['--port', '0'], {})).toEqual({ demo: true, args: ['--port', '0', '--demo'] });
  });
  it('--no-demo turns it off and is not passed on', () => {
    expect(launchOptions(['--no-demo', '--runs', 'r'], {})).toEqual({ demo: false, args: ['--runs', 'r'] });
  });
  it('SHARDWISE_NO_DEMO=1 turns it off; empty or 0 leaves it on', () => {
    expect(launchOptions([], { SHARDWISE_NO_DEMO: '1' })).toEqual({ demo: false, args: [] });
    expect(launchOptions([], { SHARDWISE_NO_DEMO: '' }).demo).toBe(true);
    expect(launchOptions([], { SHARDWISE_NO_DEMO: '0' }).demo).toBe(true);
  });
});

describe('npm start: opening the browser', () => {
  const url = 'http://127.0.0.1:7411/#token=t';
  it('on Linux only with a display (DISPLAY or WAYLAND_DISPLAY), through xdg-open', () => {
    expect(browserOpener(url, 'linux', {})).toBeNull();
    expect(browserOpener(url, 'linux', { DISPLAY: ':0' })).toEqual(['xdg-open', [url]]);
    expect(browserOpener(url, 'linux', { WAYLAND_DISPLAY: 'wayland-0' })).toEqual(['xdg-open', [url]]);
  });
  it('macOS and Windows always have one', () => {
    expect(browserOpener(url, 'darwin', {})).toEqual(['open', [url]]);
    expect(browserOpener(url, 'win32', {})).toEqual(['cmd', ['/c', 'start', '', url]]);
  });
});
