// Gradio's markdown styles carry the code highlighter's (Prism's) rule
// `.md code[class*="language-"] ::selection`: an attribute selector with a descendant after it.
// For that rule Chromium restyles every element below any element whose class changes, and
// Gradio and the chat box change classes on the chat's ancestors at every turn, so a long
// chat's every change restyled thousands of elements. Its descendant half is dropped; the
// half on the code element stays, and Chromium's ::selection styles are inherited (highlight
// inheritance), so the code's spans are selected in the same colours. The styles arrive with
// the components that use them, so stylesheets added later are narrowed too.
  const narrow = (rules) => {
    for (const rule of rules) {
      if (rule.cssRules && !rule.selectorText) narrow(rule.cssRules);  // @media, @layer...
      else if (rule.selectorText && rule.selectorText.includes('] ::selection'))
        rule.selectorText = rule.selectorText.split(/,\s*/).filter((s) => !/\]\s+::selection$/.test(s)).join(', ');
    }
  };
  const narrowSheet = (sheet) => { try { narrow(sheet.cssRules); } catch (e) { /* not loaded, another origin's */ } };
  const watch = (node) => {
    if (node.tagName !== 'STYLE' && node.tagName !== 'LINK') return;
    if (node.sheet) narrowSheet(node.sheet);
    if (node.tagName === 'LINK') node.addEventListener('load', () => narrowSheet(node.sheet));
  };
  document.querySelectorAll('style, link[rel="stylesheet"]').forEach(watch);
  new MutationObserver((changes) => changes.forEach((change) => change.addedNodes.forEach(watch)))
    .observe(document.head, {childList: true});
