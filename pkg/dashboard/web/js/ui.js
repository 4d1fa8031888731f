// Shared page furniture: the alert and notice regions, the confirmation dialog, headings.
import {h} from './dom.js';

const $ = (id) => document.getElementById(id);

// setAlert shows text in the alert region (role="alert": read out at once). Empty text
// hides it, but only when the same owner put it there: a page's refresh ("load") does not
// wipe out the error of an action the user just tried ("action").
let alertOwner = '';
export function setAlert(text, owner = 'load') {
  const el = $('alert');
  if (!text && alertOwner !== owner) return;
  alertOwner = text ? owner : '';
  el.textContent = text || '';
  el.hidden = !text;
}

// setNotice shows the result of an action in the polite status region.
export function setNotice(text) {
  const el = $('notice');
  el.textContent = text || '';
  el.hidden = !text;
}

export function clearMessages() {
  alertOwner = '';
  $('alert').textContent = '';
  $('alert').hidden = true;
  setNotice('');
}

// pageTitle sets the document title and returns the page's <h1>, which takes the focus
// after an in-app navigation so that a screen reader announces the new page.
export function pageTitle(text, sub) {
  document.title = `${text} — Stepwise`;
  return h('h1', {id: 'page-title', tabindex: '-1'}, text, sub ? [' ', h('span', {class: 'h1-sub', text: sub})] : null);
}

let pendingFocus = false;
export const focusTitleOnRender = () => { pendingFocus = true; };
export function focusTitle() {
  if (!pendingFocus) return;
  const t = $('page-title');
  if (t) { pendingFocus = false; t.focus({preventScroll: false}); }
}

// confirmDialog asks to confirm an action in the modal <dialog>: it resolves true on
// Confirm, false on Cancel or Escape. The dialog takes the focus (its first field, or
// Cancel for a destructive action) and gives it back to what had it.
export function confirmDialog({title, body, extra, confirmLabel = 'Confirm', danger = false}) {
  const dlg = $('dialog');
  const opener = document.activeElement;
  $('dialog-title').textContent = title;
  $('dialog-body').replaceChildren(...[].concat(body).map((b) => (b instanceof Node ? b : h('p', {text: b}))));
  $('dialog-extra').replaceChildren(...(extra ? [extra] : []));
  const ok = $('dialog-confirm');
  const cancel = $('dialog-cancel');
  ok.textContent = confirmLabel;
  ok.classList.toggle('danger', !!danger);
  return new Promise((resolve) => {
    let result = false;
    const onOk = () => { result = true; dlg.close('confirm'); };
    const onCancel = () => { dlg.close('cancel'); };
    const onClose = () => {
      ok.removeEventListener('click', onOk);
      cancel.removeEventListener('click', onCancel);
      dlg.removeEventListener('close', onClose);
      if (opener && opener.isConnected && typeof opener.focus === 'function') opener.focus();
      resolve(result);
    };
    ok.addEventListener('click', onOk);
    cancel.addEventListener('click', onCancel);
    dlg.addEventListener('close', onClose);
    dlg.showModal();
    const first = $('dialog-extra').querySelector('select, input, textarea');
    (first || (danger ? cancel : ok)).focus();
  });
}

// section wraps content in a labelled <section>.
export function section(title, id, ...content) {
  return h('section', {class: 'panel', 'aria-labelledby': id},
    h('h2', {id, text: title}), ...content);
}

export const empty = (text) => h('p', {class: 'empty', text});
