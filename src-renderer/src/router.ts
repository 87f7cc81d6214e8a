// Hash routes, no router library: #/cluster, #/launch, #/runs, #/run/ID, #/compare/A/B.
// The page first opens on #token=...[&view=/run/ID] (web mode): the token is kept and the hash
// becomes the route `view` names (`npm start`'s demo run), else the cluster view.
import { reactive } from 'vue';
import { pageToken } from './api/connection';

export type Route =
  | { name: 'cluster' }
  | { name: 'launch' }
  | { name: 'runs' }
  | { name: 'run'; runId: string }
  | { name: 'compare'; a: string; b: string }
  | { name: 'unknown'; path: string };

function parse(hash: string): Route {
  const parts = hash
    .replace(/^#\/?/, '')
    .split('/')
    .map((p) => decodeURIComponent(p));
  switch (parts[0]) {
    case '':
    case 'cluster':
      return { name: 'cluster' };
    case 'launch':
      return { name: 'launch' };
    case 'runs':
      return { name: 'runs' };
    case 'run':
      if (parts[1]) return { name: 'run', runId: parts[1] };
      break;
    case 'compare':
      if (parts[1] && parts[2]) return { name: 'compare', a: parts[1], b: parts[2] };
      break;
  }
  return { name: 'unknown', path: hash };
}

export const route = reactive<{ current: Route }>({ current: { name: 'cluster' } });

export function startRouter() {
  if (/token=/.test(window.location.hash)) {
    pageToken(); // remembered for this tab
    const view = new URLSearchParams(window.location.hash.replace(/^#/, '')).get('view');
    history.replaceState(null, '', view?.startsWith('/') ? `#${view}` : '#/cluster');
  }
  route.current = parse(window.location.hash);
  window.addEventListener('hashchange', () => (route.current = parse(window.location.hash)));
}

export const go = (hash: string) => {
  window.location.hash = hash;
};
export const runHash = (id: string) => `#/run/${encodeURIComponent(id)}`;
