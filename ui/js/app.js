// The UI's entry: asks the server what the tab's token may do (a token is
// asked for when the server wants one), draws the navigation, and shows the
// page the URL names. Pages are modules with `render(main, access, signal)`.

import { h, fill } from './dom.js';
import { call, token, setToken } from './api.js';
import * as query from './query.js';
import * as explore from './explore.js';
import * as status from './status.js';
import * as write from './write.js';
import * as alerts from './alerts.js';

const PAGES = { query, explore, alerts, status, write };
const TITLES = { query: 'Query', explore: 'Explore', alerts: 'Alerts', status: 'Status', write: 'Write' };

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const who = document.getElementById('who');
let access = null;
let leaving = null;

/** What the token may do (/api/v1/access), or null when it is refused. */
async function loadAccess() {
  try {
    access = await call('/api/v1/access');
    if (!access.write) access.writeReason = 'This token may not write: it is read-only.';
    return access;
  } catch (err) {
    if (err.status === 401) return null;
    throw err;
  }
}

/** The page's name from the URL: /ui/<page>. */
function pageName() {
  const name = location.pathname.replace(/^\/ui\/?/, '').split('/')[0];
  return PAGES[name] ? name : 'query';
}

function drawNav() {
  const current = pageName();
  const shown = Object.keys(PAGES).filter((name) => access.read || !['query', 'explore', 'alerts'].includes(name));
  fill(nav, shown.map((name) => h('a', {
    href: `/ui/${name}`, 'data-nav': '', id: `nav-${name}`, class: name === current ? 'current' : null,
  }, TITLES[name])));
  const scope = access.databases ? `databases ${access.databases.join(', ')}` : 'every database';
  const rights = [access.read && 'read', access.write && 'write', access.admin && 'admin'].filter(Boolean).join(', ');
  fill(who, access.auth ? [h('span', { id: 'who-scope' }, `${rights} · ${scope}`), ' ',
    h('button', { id: 'forget-token', onclick: () => { setToken(''); access = null; start(); } }, 'Forget token')] : null);
}

async function route() {
  if (leaving) leaving.abort();
  leaving = new AbortController();
  const name = pageName();
  if (!location.pathname.startsWith(`/ui/${name}`)) history.replaceState(null, '', `/ui/${name}${location.search}`);
  document.title = `${TITLES[name]} · chingest`;
  drawNav();
  main.dataset.page = name;
  fill(main, h('p', { class: 'hint' }, 'loading…'));
  try {
    await PAGES[name].render(main, access, leaving.signal);
  } catch (err) {
    if (err.status !== 401) fill(main, h('div', { class: 'error', role: 'alert' }, err.message));
  }
}

/** Asks for a token; `refused` says the last one was not accepted. */
function askToken(refused) {
  fill(nav);
  fill(who);
  main.dataset.page = 'token';
  const input = h('input', { id: 'token-input', type: 'password', autocomplete: 'off', placeholder: 'token', required: true });
  fill(main, h('form', {
    class: 'token-form',
    onsubmit: async (event) => {
      event.preventDefault();
      setToken(input.value.trim());
      start();
    },
  },
  h('h1', {}, 'This server asks for a token'),
  h('p', {}, 'One of the server\'s auth_tokens or [[tokens]]. It is kept for this tab only.'),
  refused ? h('div', { class: 'error', role: 'alert', id: 'token-refused' }, 'The server did not accept that token (401).') : null,
  input, ' ', h('button', { class: 'primary', type: 'submit' }, 'Use token')));
  input.focus();
}

async function start() {
  try {
    if (await loadAccess()) route();
    else askToken(Boolean(token()));
  } catch (err) {
    fill(main, h('div', { class: 'error', role: 'alert' }, `The server did not answer: ${err.message}`));
  }
}

document.addEventListener('click', (event) => {
  const link = event.target.closest('a[data-nav]');
  if (!link || event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
  event.preventDefault();
  history.pushState(null, '', link.getAttribute('href'));
  route();
});
window.addEventListener('popstate', route);
// A token that stops working (removed from the configuration) asks again;
// before the first answer, `start` asks.
window.addEventListener('chingest:unauthorized', () => {
  if (!access) return;
  access = null;
  askToken(true);
});
start();
