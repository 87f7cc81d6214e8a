// The Electron shell's pure parts, without the Electron binary: which channels and payloads the
// main process accepts, whose messages it answers (only the app's own window and page), the
// native menu's template, and the IPC dispatch (IpcApi) serving a real ControllerService on a
// scratch runs folder to a stand-in window: calls, errors with their names, a run's event stream.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { MenuItemConstructorOptions } from 'electron';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError, IPC_CHANNELS, IpcReplySchema, type RunEvent, type ShardwiseBridge } from '../../common/api/index.js';
import { ControllerService } from '../../src-main/controller/service.js';
import { parseInvoke } from '../../src-main/shell/channels.js';
import { IpcApi, type IpcPeer } from '../../src-main/shell/ipc-api.js';
import { type MenuCommand, menuTemplate, runIdOfUrl } from '../../src-main/shell/menu.js';
import { isAppUrl, senderProblem } from '../../src-main/shell/security.js';
import { IpcApiClient } from '../../src-renderer/src/api/ipc-client.js';
import { writePipelineRun } from '../e2e/run-fixtures.js';

const APP = { frameUrl: 'app://shardwise/index.html#/runs', isMainFrame: true, fromAppWindow: true };

describe('shell: channels and payloads', () => {
  it('accepts the three invoke channels with their payloads and names what is wrong otherwise', () => {
    expect(parseInvoke('shardwise:call', { method: 'runs.list', params: {} })).toEqual({
      channel: 'shardwise:call',
      method: 'runs.list',
      params: {},
    });
    expect(parseInvoke('shardwise:subscribe', { runId: 'abc' })).toEqual({ channel: 'shardwise:subscribe', runId: 'abc' });
    expect(() => parseInvoke('shardwise:event', {})).toThrow(
      /unknown channel "shardwise:event"; a renderer may invoke shardwise:call, shardwise:subscribe, shardwise:unsubscribe/,
    );
    expect(() => parseInvoke('other:call', {})).toThrow(/unknown channel/);
    expect(() => parseInvoke('shardwise:call', { method: 'runs.list', params: {}, extra: 1 })).toThrow(
      /shardwise:call: \(top level\): unknown field "extra"/,
    );
    expect(() => parseInvoke('shardwise:call', { params: {} })).toThrow(/shardwise:call: method:/);
    expect(() => parseInvoke('shardwise:call', { method: 'runs.subscribe', params: { runId: 'a' } })).toThrow(
      /use the shardwise:subscribe/,
    );
    expect(() => parseInvoke('shardwise:unsubscribe', { runId: '../etc' })).toThrow(
      /shardwise:unsubscribe: runId: a run id is a run folder name/,
    );
  });
});

describe('shell: sender checks', () => {
  it("answers only the app's own page in its own window's main frame", () => {
    expect(isAppUrl('app://shardwise/index.html')).toBe(true);
    for (const url of [
      'app://shardwise.evil.com/index.html',
      'app://evil/index.html',
      'https://shardwise/index.html',
      'file:///index.html',
      'app://user@shardwise/',
      'app://shardwise:8080/',
      'not a url',
      '',
      undefined,
    ]) {
      expect(isAppUrl(url), String(url)).toBe(false);
    }
    expect(senderProblem(APP)).toBeNull();
    expect(senderProblem({ ...APP, frameUrl: 'https://example.com/' })).toMatch(
      /the sending page "https:\/\/example.com\/" is not app:\/\/shardwise\//,
    );
    expect(senderProblem({ ...APP, isMainFrame: false })).toMatch(/sub-frame/);
    expect(senderProblem({ ...APP, fromAppWindow: false })).toMatch(/not come from a Shardwise window/);
    expect(senderProblem({ ...APP, frameUrl: undefined })).toMatch(/\(gone\)/);
  });
});

describe('shell: native menu', () => {
  const items = (t: MenuItemConstructorOptions[], label: string) =>
    t.find((m) => m.label === label || m.role === label)!.submenu as MenuItemConstructorOptions[];

  it('File has New run, Runs, four exports (enabled only with a run open) and Quit; each item runs its command', () => {
    const ran: MenuCommand[] = [];
    const t = menuTemplate({ dev: false, platform: 'linux', runOpen: true }, (c) => ran.push(c));
    expect(t.map((m) => m.label ?? m.role)).toEqual(['File', 'editMenu', 'View', 'help']);
    const file = items(t, 'File');
    expect(file.filter((i) => i.type !== 'separator').map((i) => i.id ?? i.role)).toEqual([
      'new-run',
      'runs',
      'export-html',
      'export-pdf',
      'export-trace',
      'export-csv',
      'quit',
    ]);
    for (const i of file) (i.click as (() => void) | undefined)?.();
    expect(ran).toEqual([
      { kind: 'go', hash: '#/launch' },
      { kind: 'go', hash: '#/runs' },
      { kind: 'export', format: 'html' },
      { kind: 'export', format: 'pdf' },
      { kind: 'export', format: 'trace' },
      { kind: 'export', format: 'csv' },
    ]);
    expect(file.filter((i) => i.id?.startsWith('export-')).every((i) => i.enabled)).toBe(true);
    const closed = items(
      menuTemplate({ dev: false, platform: 'linux', runOpen: false }, () => undefined),
      'File',
    );
    expect(closed.filter((i) => i.id?.startsWith('export-')).every((i) => i.enabled === false)).toBe(true);
    (items(t, 'help')[0]!.click as () => void)();
    expect(ran.at(-1)).toEqual({ kind: 'about' });
  });

  it('View has reload and devtools in development only; macOS gets its app menu', () => {
    const roles = (dev: boolean) =>
      items(
        menuTemplate({ dev, platform: 'linux', runOpen: false }, () => undefined),
        'View',
      )
        .map((i) => i.role)
        .filter(Boolean);
    expect(roles(true)).toEqual(expect.arrayContaining(['reload', 'toggleDevTools']));
    expect(roles(false)).not.toContain('reload');
    expect(roles(false)).not.toContain('toggleDevTools');
    expect(menuTemplate({ dev: false, platform: 'darwin', runOpen: false }, () => undefined)[0]!.role).toBe('appMenu');
  });

  it('finds the run a window shows from its URL', () => {
    expect(runIdOfUrl('app://shardwise/index.html#/run/20261129-tiny-pp-abc')).toBe('20261129-tiny-pp-abc');
    expect(runIdOfUrl('app://shardwise/index.html#/run/a%2Eb')).toBe('a.b');
    expect(runIdOfUrl('app://shardwise/index.html#/runs')).toBeNull();
    expect(runIdOfUrl('app://shardwise/index.html')).toBeNull();
  });
});

describe('shell: IPC dispatch over a real controller', () => {
  let dir: string;
  let service: ControllerService;
  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'shardwise-ipc-'));
    writePipelineRun(path.join(dir, 'runs', 'pp-fixture'));
    service = new ControllerService({ runsRoot: path.join(dir, 'runs') });
  });
  afterAll(async () => {
    await service.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** a stand-in for the window's webContents: records what the main process sends it */
  function peer(id: number): IpcPeer & { sent: { channel: string; message: any }[]; destroyed: boolean } {
    const p = {
      id,
      sent: [] as { channel: string; message: any }[],
      destroyed: false,
      send: (channel: string, message: unknown) => p.sent.push({ channel, message }),
      isDestroyed: () => p.destroyed,
    };
    return p;
  }

  it('answers calls with results, errors with their names, and refuses a foreign sender before the service sees it', async () => {
    const api = new IpcApi(service);
    const w = peer(1);
    const list = await api.handle(IPC_CHANNELS.call, w, APP, { method: 'runs.list', params: {} });
    expect(IpcReplySchema.parse(list)).toMatchObject({ ok: true, result: { runs: [{ id: 'pp-fixture' }] } });
    expect(await api.handle(IPC_CHANNELS.call, w, APP, { method: 'runs.get', params: { runId: 'nope' } })).toMatchObject({
      ok: false,
      error: { name: 'NotFound' },
    });
    expect(
      await api.handle(IPC_CHANNELS.call, w, APP, { method: 'runs.metrics', params: { runId: 'pp-fixture', fromStep: -1 } }),
    ).toMatchObject({
      ok: false,
      error: { name: 'ValidationError', message: expect.stringMatching(/runs\.metrics params: fromStep/) },
    });
    expect(await api.handle(IPC_CHANNELS.call, w, APP, { method: 'no.such', params: {} })).toMatchObject({
      ok: false,
      error: { name: 'ValidationError', message: expect.stringMatching(/unknown method "no.such"/) },
    });
    expect(
      await api.handle(
        IPC_CHANNELS.call,
        w,
        { ...APP, frameUrl: 'https://evil.example/' },
        { method: 'runs.delete', params: { runId: 'pp-fixture' } },
      ),
    ).toMatchObject({ ok: false, error: { name: 'Forbidden' } });
    expect(service.store.exists('pp-fixture'), 'the refused delete never reached the controller').toBe(true);
    expect(await api.handle('shardwise:whatever', w, APP, {})).toMatchObject({ ok: false, error: { name: 'ValidationError' } });
  });

  it("streams a subscribed run's events to its window on shardwise:event (a snapshot first) until unsubscribed or the window goes", async () => {
    const api = new IpcApi(service);
    const w = peer(2);
    expect(await api.handle(IPC_CHANNELS.subscribe, w, APP, { runId: 'pp-fixture' })).toEqual({ ok: true, result: { ok: true } });
    await expect.poll(() => w.sent.length, { timeout: 5000 }).toBeGreaterThan(0);
    const first = w.sent[0]!;
    expect(first.channel).toBe('shardwise:event');
    expect(first.message).toMatchObject({ event: 'run', runId: 'pp-fixture' });
    expect((first.message.data as RunEvent).type).toBe('snapshot');
    expect(await api.handle(IPC_CHANNELS.unsubscribe, w, APP, { runId: 'pp-fixture' })).toEqual({ ok: true, result: { ok: true } });
    expect(await api.handle(IPC_CHANNELS.subscribe, w, APP, { runId: 'missing-run' })).toMatchObject({
      ok: false,
      error: { name: 'NotFound' },
    });
    // a closed window: nothing more is sent to it, and its session is released
    w.destroyed = true;
    api.release(2);
    expect(await api.handle(IPC_CHANNELS.call, peer(3), APP, { method: 'runs.list', params: {} })).toMatchObject({ ok: true });
  });

  it("the renderer's IPC client over a preload-shaped bridge: typed results, ApiErrors by name, checked events", async () => {
    const api = new IpcApi(service);
    const listeners = new Map<string, (d: unknown) => void>();
    const w: IpcPeer = {
      id: 4,
      isDestroyed: () => false,
      send: (_c, m) => listeners.get((m as { runId: string }).runId)?.((m as { data: unknown }).data),
    };
    // what preload.ts does, minus ipcRenderer
    const bridge: ShardwiseBridge = {
      version: 'test',
      call: (method, params) => api.handle(IPC_CHANNELS.call, w, APP, { method, params }),
      subscribe: (runId, on) => (listeners.set(runId, on), api.handle(IPC_CHANNELS.subscribe, w, APP, { runId })),
      unsubscribe: (runId) => (listeners.delete(runId), api.handle(IPC_CHANNELS.unsubscribe, w, APP, { runId })),
    };
    const client = new IpcApiClient(bridge);
    expect((await client.call('runs.get', { runId: 'pp-fixture' })).config).toBeTruthy();
    const err = await client.call('runs.get', { runId: 'no-such-run' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).name).toBe('NotFound');
    // a bad request fails in the renderer, before it is sent
    await expect(client.call('runs.metrics', { runId: 'pp-fixture', fromStep: -1 })).rejects.toThrow(/runs\.metrics params: fromStep/);
    const events: RunEvent[] = [];
    const stop = await client.subscribe('pp-fixture', (e) => events.push(e));
    await expect.poll(() => events.length, { timeout: 5000 }).toBeGreaterThan(0);
    expect(events[0]!.type).toBe('snapshot');
    await stop();
    expect(listeners.has('pp-fixture')).toBe(false);
  });
});
