// The chat box follows the newest message while its reader is at the bottom, and stays where
// one who scrolled up left it (the Chatbots inside it do not scroll: app.css). It watches the
// sizes of the two Chatbots, so a streamed token, a new message or an image that finished
// loading all count, and it costs no extra layout. When the live part changes it also marks
// the box with what the CSS needs to know of it (live-shown, live-turn).
// While a reply grows below the history, with its reader following it, each message of the
// history it pushes out of view is hidden until found (content-visibility: hidden, at its
// size), then the whole history: they cost the frames nothing, and the browser's search still
// finds what is in them. They are shown again at once when the reader scrolls, when search
// finds something in them, when the turn ends, and when the reply has not grown for a second
// (a tool call waiting for its result). While hidden, screen readers do not read them: that
// is why only then.
  const follow = () => {
    const box = document.querySelector('#chatbot'), live = document.querySelector('#chat-live'),
          history = document.querySelector('#chat-history');
    if (!box || !live || !history) return setTimeout(follow, 200);
    // The history's messages (it does not change while a turn streams), the first hiddenRows of
    // them hidden. The whole history only at a later update than its last message: hidden at
    // once, it would leave that message's style as it was (content-visibility: auto).
    let resting, rows = null, hiddenRows = 0;
    const show = () => {
      clearTimeout(resting);
      if (!hiddenRows) return;
      history.removeAttribute('hidden');
      rows.slice(0, hiddenRows).forEach((row) => row.removeAttribute('hidden'));
      hiddenRows = 0;
    };
    const rest = (top) => {
      clearTimeout(resting);
      resting = setTimeout(show, 1000);
      rows ??= [...history.querySelectorAll('.message-row')];
      if (rows.length && hiddenRows === rows.length) {  // all hidden at an earlier update
        if (!history.hidden && history.getBoundingClientRect().bottom <= top) {
          history.setAttribute('hidden', 'until-found');
        }
        return;
      }
      // all read before any is hidden: each change would need a new layout to read the next
      let above = hiddenRows;
      while (above < rows.length && rows[above].getBoundingClientRect().bottom <= top) above++;
      for (; hiddenRows < above; hiddenRows++) rows[hiddenRows].setAttribute('hidden', 'until-found');
    };
    // Reaching the bottom, however, pins; only the reader's own scrolling (wheel, touch, keys,
    // the scrollbar) unpins: the browser also scrolls the box when its content is redrawn.
    let pinned = true, readerUntil = 0, dragging = false;
    const reader = () => { readerUntil = performance.now() + 500; show(); };
    for (const type of ['wheel', 'touchmove', 'keydown']) box.addEventListener(type, reader, {passive: true});
    box.addEventListener('pointerdown', () => { dragging = true; }, {passive: true});
    // (a click elsewhere, on a tab say, is not the reader's scrolling of the chat)
    window.addEventListener('pointerup', () => { if (dragging) reader(); dragging = false; }, {passive: true});
    box.addEventListener('scroll', () => {
      if (box.scrollHeight - box.scrollTop - box.clientHeight < 80) pinned = true;
      else {
        if (dragging || performance.now() < readerUntil) pinned = false;
        show();  // whatever scrolled it up shows what is there
      }
    }, {passive: true});
    // The search found something hidden in the history (the browser shows it and goes there;
    // from a message, the event bubbles up).
    history.addEventListener('beforematch', () => { pinned = false; show(); });
    const grown = new ResizeObserver(() => {
      const liveShown = live.querySelector('.message-row') !== null;
      box.classList.toggle('live-shown', liveShown);
      // A turn's end: the switch renders the whole history again (CSS), so it waits for the
      // next frame, not to add to the one that shows the settled turn.
      const turn = () => live.querySelector('.user-row') !== null, inTurn = turn();
      if (inTurn) box.classList.add('live-turn');
      else if (box.classList.contains('live-turn')) {
        requestAnimationFrame(() => { if (!turn()) box.classList.remove('live-turn'); });
      }
      // (an empty chat shows its examples from the first)
      if (pinned && (liveShown || box.querySelector('.message-row'))) box.scrollTop = box.scrollHeight;
      if (inTurn && pinned && !history.contains(document.activeElement)) rest(box.getBoundingClientRect().top);
      else {
        show();
        if (!inTurn) rows = null;
      }
    });
    box.querySelectorAll(':scope > .block').forEach((part) => grown.observe(part));
  };
  follow();
