// MathJax settings for the dpopt site. The MathJax library itself is not in the repository: the
// build (scripts/mkdocs_hooks.py) copies it into the site from the installed Python package
// "django-static-mathjax", so pages render their formulas offline, also opened from file://.
// pymdownx.arithmatex (generic mode) wraps every formula in an element of class "arithmatex"
// delimited by \( \) or \[ \]; MathJax typesets only those elements.
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true,
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex",
  },
  svg: { fontCache: "global" },
};
