// recmix was built without Chart.js: install libjs-chart.js (scripts/install-deps.sh) and rebuild.
