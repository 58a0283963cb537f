// The console's one script: POST forms go out with the CSRF header and their answer (an
// HTML fragment rendered and escaped by the server) replaces the form's target; focus
// moves to it so keyboard and screen-reader users land on the result. No dependencies.
"use strict";

const csrf = document.querySelector('meta[name="csrf-token"]').content;

function show(target, html) {
  target.innerHTML = html;
  target.hidden = false;
  target.removeAttribute("aria-busy");
  const focus = target.querySelector("[data-focus]") || target;
  focus.focus();
}

// forms with a request in flight: a second submit (a double click on "Forget") is dropped,
// so a removal runs once and its counts are not replaced by a repeat's zeros
const pending = new WeakSet();

function busy(form, on) {
  for (const element of form.elements) {
    if (element instanceof HTMLButtonElement && element.type === "submit") element.disabled = on;
  }
  if (on) pending.add(form);
  else pending.delete(form);
}

document.addEventListener("submit", async (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || form.method.toLowerCase() !== "post") return;
  event.preventDefault();
  if (pending.has(form)) return;
  const target = document.querySelector(form.dataset.target);
  const body = new URLSearchParams(new FormData(form, event.submitter));
  busy(form, true);
  target.setAttribute("aria-busy", "true");
  try {
    const response = await fetch(form.action, {
      method: "POST",
      headers: { "X-Ratatoskr-CSRF": csrf },
      body,
      credentials: "same-origin",
    });
    show(target, await response.text());
  } catch (error) {
    show(target, '<div class="notice error" role="alert" tabindex="-1" data-focus>The console did not answer.</div>');
  } finally {
    busy(form, false);
  }
});

function close(target) {
  target.innerHTML = "";
  target.hidden = true;
  const main = document.getElementById("main");
  if (main) main.focus();
}

document.addEventListener("click", (event) => {
  const button = event.target.closest("[data-close]");
  if (button) close(document.querySelector(button.dataset.close));
});

document.addEventListener("keydown", (event) => {
  if (event.key !== "Escape") return;
  // the panel holding the focus, else the first one open
  const focused = document.activeElement && document.activeElement.closest(".result");
  const open = focused || document.querySelector(".result:not([hidden])");
  if (open) close(open);
});
