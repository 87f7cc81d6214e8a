// What `npm start` (out/main/launch.js) decides before starting anything: whether the first-start
// demo runs, what the app or `shardwise serve` is given, and whether a browser can be opened.
// Pure, so that each rule is tested on its own (tests/unit/launch-options.test.ts).

export interface LaunchOptions {
  /** launch the demo run when the runs folder is empty (off: --no-demo or SHARDWISE_NO_DEMO=1) */
  demo: boolean;
  /** the arguments for the desktop app or `shardwise serve`: the user's, less --no-demo, plus --demo */
  args: string[];
}

export function launchOptions(argv: string[], env: NodeJS.ProcessEnv): LaunchOptions {
  const noDemoEnv = env.SHARDWISE_NO_DEMO !== undefined && !['', '0', 'false'].includes(env.SHARDWISE_NO_DEMO);
  const demo = !argv.includes('--no-demo') && !noDemoEnv;
  const args = argv.filter((a) => a !== '--no-demo' && a !== '--demo');
  return { demo, args: demo ? [...args, '--demo'] : args };
}

/**
 * How to open a URL in the system's browser, or null where there is none to show it on: on
 * Linux and the BSDs a graphical session sets DISPLAY (X11) or WAYLAND_DISPLAY; without either
 * (ssh, a container, CI, the tests) xdg-open would fall back to a text browser or fail.
 */
export function browserOpener(url: string, platform: NodeJS.Platform, env: NodeJS.ProcessEnv): [string, string[]] | null {
  if (platform === 'darwin') return ['open', [url]];
  if (platform === 'win32') return ['cmd', ['/c', 'start', '', url]];
  if (!env.DISPLAY && !env.WAYLAND_DISPLAY) return null;
  return ['xdg-open', [url]];
}
