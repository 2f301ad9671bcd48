// Each message of Gradio's Chatbot re-runs its attribute effect whenever the number of
// messages changes (it marks the latest), and that effect ends with `element.dir = element.dir`.
// Chromium treats every write of `dir`, even of the value it has, as a change of direction
// and restyles the element's whole subtree: when a turn settles into a long history, every
// element of the chat. A write of the value already there changes nothing, so it is skipped;
// any real change of direction goes through.
  const dir = Object.getOwnPropertyDescriptor(HTMLElement.prototype, 'dir');
  Object.defineProperty(HTMLElement.prototype, 'dir', {...dir, set(value) {
    if (this.getAttribute('dir') !== String(value)) dir.set.call(this, value);
  }});
